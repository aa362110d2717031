package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// With one of three nodes refusing connections, health says one thing
// about it everywhere: the probe that finds it refused cools it down, so
// the nodes list it unhealthy with why, the provider's detail says the
// same, and the status is degraded (the primary answers on fewer nodes
// than it has), naming it.
func TestHealthHasOneViewOfANode(t *testing.T) {
	var urls []string
	for range 2 {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}})
		t.Cleanup(f.Close)
		urls = append(urls, f.URL)
	}
	urls = append(urls, fakeengine.Down(t))
	g := gatewayFor(t, fmt.Sprintf("nodes:\n  - {name: a, url: %s, dialect: llamacpp, models: [tiny]}\n  - {name: b, url: %s, dialect: llamacpp, models: [tiny]}\n"+
		"  - {name: c, url: %s, dialect: llamacpp, models: [tiny]}\n"+
		"gateway:\n  chain:\n    - {name: local, model: tiny}\n", urls[0], urls[1], urls[2]))

	h := g.Health(context.Background())
	if h.Status != HealthDegraded || !h.Providers[0].OK {
		t.Errorf("status %s, primary ok %v; want degraded with the primary up: %s", h.Status, h.Providers[0].OK, h.Summary)
	}
	if !strings.Contains(h.Summary, "node c") || !strings.Contains(h.Summary, "refused") {
		t.Errorf("the summary does not name the node down and why: %s", h.Summary)
	}
	if len(h.Nodes) != 3 {
		t.Fatalf("nodes %+v", h.Nodes)
	}
	for _, n := range h.Nodes {
		up := strings.Contains(h.Providers[0].Detail, "node "+n.Name+": up")
		if n.Healthy != up || n.Healthy != (n.Name != "c") {
			t.Errorf("node %s: healthy %v, the probe's detail says up %v: %s", n.Name, n.Healthy, up, h.Providers[0].Detail)
		}
		if !n.Healthy && !strings.Contains(n.CoolReason, "refused") {
			t.Errorf("node %s is down without why: %+v", n.Name, n)
		}
	}
	if got := fleet.FleetStatus(g.router.States()); got != fleet.FleetDegraded {
		t.Errorf("the fleet's status %s, want %s", got, fleet.FleetDegraded)
	}
}
