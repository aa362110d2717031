package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/mcpserver"
)

// health calls system1_health and returns its answer.
func (s *mcpSession) health(t testing.TB) gateway.Health {
	t.Helper()
	res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolHealth, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("calling %s: %v\nstderr:\n%s", mcpserver.ToolHealth, err, s.stderr)
	}
	var h gateway.Health
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// A System One endpoint configured as a node (dialect: systemone) behind
// an engine provider once crashed system1 mcp with a nil dereference on
// the first system1_health. The built binary now answers health and
// decide over that node, and keeps serving.
func TestSystemOneNodeBehindEngineProvider(t *testing.T) {
	up := startNode(t, "jev", systemOneNode, B{}, long)
	t.Cleanup(up.close)
	threshold := 0.4
	cfg := &config.Config{
		Nodes:     []config.Node{up.cfg},
		Gateway:   config.Gateway{Threshold: &threshold},
		Providers: []config.Provider{{Name: "local", Kind: "engine", Model: fakeModel}},
	}
	s := startMCP(t, cfg)
	for round := range 2 {
		h := s.health(t)
		if h.Status != gateway.HealthOK || len(h.Providers) != 1 || !h.Providers[0].OK || !strings.Contains(h.Providers[0].Detail, "node jev: up") {
			t.Fatalf("round %d: health %+v\nstderr:\n%s", round, h, s.stderr)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(question), &args); err != nil {
			t.Fatal(err)
		}
		raw, isError := s.decide(t, args)
		var res gateway.Response
		if err := json.Unmarshal(raw, &res); err != nil || isError || res.Status != gateway.Decided || res.Decision == nil || *res.Decision != "billing" ||
			len(res.Attempts) != 1 || !strings.Contains(res.Attempts[0].Detail, "answered by node jev") {
			t.Fatalf("round %d: decide %s (%v)\nstderr:\n%s", round, raw, err, s.stderr)
		}
	}
	if n := up.calls(); n != 2 {
		t.Errorf("the endpoint got %d decisions to answer, want 2", n)
	}
	if strings.Contains(s.stderr.String(), "panic") || strings.Contains(s.stderr.String(), "SIGSEGV") {
		t.Errorf("the server panicked:\n%s", s.stderr)
	}
}

// An engine's refusal of the request itself (400, 422) is the caller's
// error on both faces, by one rule: a 422 on /v1/systemone, invalid_request
// (HTTP 422) on /v1/decide and over MCP, and no other node or provider is
// asked. Every target is checked, the System One endpoint both as a node
// and as a provider.
func TestRefusalIsTheCallersOnBothFaces(t *testing.T) {
	for _, tg := range []target{llamacpp, openai, ollama, systemOneNode, systemOne} {
		for _, status := range []int{400, 422} {
			t.Run(fmt.Sprintf("%s/%d", tg, status), func(t *testing.T) {
				t.Parallel()
				row := decideRow{bad: B{Fault: fakeengine.Status, Status: status}}
				c := newChain(t, row, tg)
				mcpCfg := *c.cfg
				c.cfg.Normalize()
				s := serve(t, c.fakes, c.cfg.Nodes, 4*long, func(r *fleet.Router) *gateway.Gateway {
					return gateway.New(gateway.Options{Config: c.cfg, Answer: answer.New(answer.Options{Router: r}), Version: "faults"})
				})

				r := s.mustPost(t, "/v1/systemone", ticket)
				var wire struct{ Error struct{ Type string } }
				if err := json.Unmarshal(r.body, &wire); err != nil || r.status != http.StatusUnprocessableEntity || wire.Error.Type != "invalid_request_error" {
					t.Errorf("/v1/systemone: %s (%v); want a 422 invalid_request_error", r, err)
				}
				check := func(face string, raw []byte) {
					var res gateway.Response
					if err := json.Unmarshal(raw, &res); err != nil || res.Status != gateway.Failed || res.Error == nil ||
						res.Error.Code != gateway.CodeInvalidRequest || len(res.Attempts) != 1 || res.Attempts[0].Provider != "primary" {
						t.Errorf("%s: %s (%v); want invalid_request after primary alone", face, raw, err)
					}
				}
				r = s.mustPost(t, "/v1/decide", question)
				if r.status != http.StatusUnprocessableEntity {
					t.Errorf("/v1/decide: HTTP %d, want 422", r.status)
				}
				check("/v1/decide", r.body)
				if status == 422 {
					var args map[string]any
					if err := json.Unmarshal([]byte(question), &args); err != nil {
						t.Fatal(err)
					}
					raw, isError := startMCP(t, &mcpCfg).decide(t, args)
					if !isError {
						t.Error("MCP: not an error result")
					}
					check("MCP", raw)
				}
				if n := c.end.calls(); n != 0 {
					t.Errorf("the fallback was asked %d times after the caller's error", n)
				}
			})
		}
	}
}

// A model that ranks none of a question's labels, on every node that
// serves it, gives no reading to retry for: each wire refuses the
// question in its own way, as the gate's refusals are. /v1/decisions
// answers it with a refusal (200, X-System1-Refused naming it), the
// batch route gives the state /v1/systemone's 422; nothing is recorded
// as an answer, and no node is blamed.
func TestUnrankedIsARefusalOnEveryWire(t *testing.T) {
	for _, tg := range []target{llamacpp, openai, ollama} {
		t.Run(string(tg), func(t *testing.T) {
			t.Parallel()
			bad := startNode(t, "bad", tg, B{Logprobs: fakeengine.Probs()}, long)
			s := serve(t, []*node{bad}, nil, long, nil)

			r := s.mustPost(t, "/v1/decisions", `{"model":"fake","input":"Ticket: I was charged twice.","questions":[`+
				`{"type":"predicate","name":"urgent","instructions":"Is it urgent?"},`+
				`{"type":"choice","name":"dept","choices":[{"value":"billing"},{"value":"technical"},{"value":"sales"}]}]}`)
			var got struct {
				Answers []map[string]any
			}
			if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK || len(got.Answers) != 2 {
				t.Fatalf("/v1/decisions: %s (%v)", r, err)
			}
			for i, name := range []string{"urgent", "dept"} {
				if a := got.Answers[i]; a["type"] != "refusal" || a["name"] != name || len(a) != 2 {
					t.Errorf("/v1/decisions: answer %d %v, want a refusal named %s", i, a, name)
				}
			}
			if h := r.header.Get(httpapi.RefusedHeader); !strings.Contains(h, "urgent: no label ranked") || !strings.Contains(h, "dept: no label ranked") {
				t.Errorf("%s %q", httpapi.RefusedHeader, h)
			}
			if h := r.header.Get(httpapi.ServedHeader); h != "node=bad model=fake fingerprint=unknown" {
				t.Errorf("%s %q: the node and model that read it", httpapi.ServedHeader, h)
			}

			r = s.mustPost(t, "/v1/systemone/batch", `{"model":"fake","states":["a","b"],"questions":{"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`)
			var batch struct {
				Results []struct {
					Status int
					Error  struct{ Message, Type string }
				}
			}
			if err := json.Unmarshal(r.body, &batch); err != nil || r.status != http.StatusOK || len(batch.Results) != 2 {
				t.Fatalf("/v1/systemone/batch: %s (%v)", r, err)
			}
			for i, res := range batch.Results {
				if res.Status != http.StatusUnprocessableEntity || res.Error.Type != "invalid_request_error" ||
					!strings.Contains(res.Error.Message, "questions.urgent: system1 will not stand behind this answer: the model gave no reading of it") {
					t.Errorf("/v1/systemone/batch: state %d %+v, want its 422 refusal", i, res)
				}
			}
			if !state(t, s.router, "bad").Healthy {
				t.Error("the node is cooling down for its model's reading")
			}
		})
	}
}
