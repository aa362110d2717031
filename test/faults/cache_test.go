package faults_test

import (
	"encoding/json"
	"strings"
	"testing"

	"system1/internal/config"
	"system1/internal/gateway"
)

// system1 mcp with cache: set: a repeat of system1_decide is answered
// from the cache, says so, and does not reach the node.
func TestMCPDecideRepeatIsACacheHit(t *testing.T) {
	up := startNode(t, "jev", systemOneNode, B{}, long)
	t.Cleanup(up.close)
	threshold := 0.4
	cfg := &config.Config{
		Nodes:     []config.Node{up.cfg},
		Gateway:   config.Gateway{Threshold: &threshold},
		Providers: []config.Provider{{Name: "local", Kind: "engine", Model: fakeModel}},
		Cache:     config.Cache{Entries: 10},
	}
	s := startMCP(t, cfg)
	var args map[string]any
	if err := json.Unmarshal([]byte(question), &args); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"miss", "hit"} {
		raw, isError := s.decide(t, args)
		var res gateway.Response
		if err := json.Unmarshal(raw, &res); err != nil || isError || res.Status != gateway.Decided || res.Cache != want {
			t.Fatalf("call %d: decide %s (%v), want cache %q\nstderr:\n%s", i, raw, err, want, s.stderr)
		}
		if want == "hit" && (len(res.Attempts) != 1 || !strings.Contains(res.Attempts[0].Detail, "from the cache")) {
			t.Errorf("the hit's attempts: %+v", res.Attempts)
		}
	}
	if n := up.calls(); n != 1 {
		t.Errorf("the endpoint got %d decisions to answer, want 1", n)
	}
}
