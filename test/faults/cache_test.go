package faults_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/gateway"
)

// system1 mcp with cache: set: a repeat of system1_decide is answered
// from the cache, says so, and does not reach the node. Fingerprints are
// on: the first call probes the build it is served by, and its answer is
// kept under that build, which the repeat then finds.
func TestMCPDecideRepeatIsACacheHit(t *testing.T) {
	up := startNode(t, "jev", systemOneNode, B{}, long)
	t.Cleanup(up.close)
	threshold := 0.4
	cfg := &config.Config{
		Nodes:     []config.Node{up.cfg},
		Gateway:   config.Gateway{Threshold: &threshold},
		Providers: []config.Provider{{Name: "local", Kind: "engine", Model: fakeModel}},
		Cache:     config.Cache{Entries: 10},
		// Set, so on (startMCP turns an unset block off).
		Fingerprint: config.Fingerprint{CanaryEvery: config.Duration(time.Hour)},
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
		if res.Served == nil || res.Served.Fingerprint == "" {
			t.Errorf("call %d names no build: served %+v", i, res.Served)
		}
	}
	// The canary (one request to a System One node) and the miss.
	if n := up.calls(); n != 2 {
		t.Errorf("the endpoint got %d decisions to answer, want 2: the canary and the first call", n)
	}
}
