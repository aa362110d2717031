package faults_test

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
)

// natural is the fake model's answers: the question's labels, and very
// little on the constraint probe's Q and X, as a model asked for the
// colour of the sky puts on them.
var natural = fakeengine.ByLabel(map[string]float64{"A": 0.6, "B": 0.3, "C": 0.05, "Q": 0.001, "X": 0.001})

// Health says, per node, whether it holds its constraint: an openai node
// whose engine holds structured_outputs or guided_choice is probed at its
// first use and holds; one whose engine ignores it (vLLM >= 0.12 with
// guided_choice) is found failed, and the summary warns; a llama.cpp node
// has none to hold. On both faces: GET /health over real HTTP, and
// system1_health from the built binary over stdio.
func TestConstraintInHealthOnBothFaces(t *testing.T) {
	for _, tc := range []struct {
		name      string
		constrain string
		ignore    bool
		want      string
	}{
		{"holds", "structured_outputs", false, fleet.ConstraintHolds},
		{"ignores", "guided_choice", true, fleet.ConstraintFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vllm := startNode(t, "vllm", openai, fakeengine.Behavior{Logprobs: natural, IgnoreConstraint: tc.ignore}, long)
			vllm.cfg.Constrain = tc.constrain
			pre := startNode(t, "llama", llamacpp, fakeengine.Behavior{}, long, "other")
			threshold := 0.4
			cfg := &config.Config{
				Nodes:   []config.Node{vllm.cfg, pre.cfg},
				Gateway: config.Gateway{Threshold: &threshold, Timeout: config.Duration(long), Chain: []config.Link{{Name: "local", Model: fakeModel}}},
			}
			states := map[string]fleet.ConstraintState{}
			checkBefore := func(face string) {
				t.Helper()
				if s := states["vllm"]; s.State != fleet.ConstraintUnprobed || s.Method != tc.constrain {
					t.Errorf("%s: before any use the constrained node is %+v", face, s)
				}
				if s := states["llama"]; s.State != fleet.ConstraintNone {
					t.Errorf("%s: the llama.cpp node is %+v", face, s)
				}
			}

			// HTTP.
			s := serve(t, []*node{vllm, pre}, cfg.Nodes, 4*long, func(r *fleet.Router) *gateway.Gateway {
				return gateway.New(gateway.Options{Config: cfg, Answer: answer.New(answer.Options{Router: r}), Version: "faults"})
			})
			health := func() {
				t.Helper()
				resp, err := s.client.Get(s.URL + "/health")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var body struct{ Nodes []fleet.State }
				if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != 200 {
					t.Fatalf("/health: %d %s", resp.StatusCode, b)
				}
				for _, n := range body.Nodes {
					states[n.Name] = n.Constraint
				}
			}
			health()
			checkBefore("HTTP")
			if r := s.mustPost(t, "/v1/decide", question); r.status != 200 {
				t.Fatalf("decide: %s", r)
			}
			eventually(t, "the HTTP face's probe", func() bool { health(); return states["vllm"].State != fleet.ConstraintUnprobed })
			if got := states["vllm"]; got.State != tc.want || got.Model != fakeModel || got.Detail == "" {
				t.Errorf("HTTP: the constrained node is %+v, want %s", got, tc.want)
			}
			if got := states["llama"]; got.State != fleet.ConstraintNone {
				t.Errorf("HTTP: the llama.cpp node is %+v", got)
			}

			// MCP, a process of its own: its nodes are probed afresh.
			m := startMCP(t, cfg)
			mcpHealth := func() gateway.Health {
				h := m.health(t)
				for _, n := range h.Nodes {
					states[n.Name] = n.Constraint
				}
				return h
			}
			mcpHealth()
			checkBefore("MCP")
			var args map[string]any
			if err := json.Unmarshal([]byte(question), &args); err != nil {
				t.Fatal(err)
			}
			if raw, isError := m.decide(t, args); isError {
				t.Fatalf("decide: %s", raw)
			}
			var h gateway.Health
			eventually(t, "the MCP face's probe", func() bool { h = mcpHealth(); return states["vllm"].State != fleet.ConstraintUnprobed })
			if got := states["vllm"]; got.State != tc.want || got.Model != fakeModel {
				t.Errorf("MCP: the constrained node is %+v, want %s", got, tc.want)
			}
			if warned := strings.Contains(h.Summary, "node vllm (guided_choice) ignores its constraint"); warned != tc.ignore || h.Status != gateway.HealthOK {
				t.Errorf("MCP: status %s, summary %q; a warning: %v, want %v", h.Status, h.Summary, warned, tc.ignore)
			}
			if probes := countProbes(vllm); probes != 2 {
				t.Errorf("the constrained node got %d probes from two processes, want 2", probes)
			}
		})
	}
}

func countProbes(n *node) int {
	c := 0
	for _, r := range n.engine.Inferences() {
		if r.User == fleet.ConstraintProbe.User() {
			c++
		}
	}
	return c
}
