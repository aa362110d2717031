package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
)

// /health and system1_health show one view of each node, the fleet's:
// a node refusing connections is unhealthy in both, with the same
// reason and the same counts of its errors, failovers and cooldowns, and
// the fleet's status says that the others serve without it.
func TestHealthIsOneViewOfTheNodes(t *testing.T) {
	a := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{}, fallback)
	b := startNode(t, "b", fakeengine.LlamaCpp, fakeengine.Behavior{}, fallback)
	c := startNode(t, "c", fakeengine.LlamaCpp, fakeengine.Behavior{}, func(n *config.Node) { n.URL = fakeengine.Down(t) })
	s, g := serveGateway(t, 0, a, b, c)
	if r := s.ask(t, colour("x,y")); r.status != http.StatusOK {
		t.Fatal(r)
	}
	type nodeState struct {
		Name       string `json:"name"`
		Healthy    bool   `json:"healthy"`
		CoolReason string `json:"cool_reason"`
		Errors     *int64 `json:"errors"`
		Failovers  *int64 `json:"failovers"`
		Cooldowns  *int64 `json:"cooldowns"`
	}
	var health struct {
		Status      string      `json:"status"`
		NodesStatus string      `json:"nodes_status"`
		Nodes       []nodeState `json:"nodes"`
	}
	r := s.do(t, http.MethodGet, "/health", "")
	if err := json.Unmarshal(r.body, &health); err != nil || health.Status != "ok" || len(health.Nodes) != 3 {
		t.Fatalf("%s", r)
	}
	if health.NodesStatus != fleet.FleetDegraded {
		t.Errorf("nodes_status %q, want %q", health.NodesStatus, fleet.FleetDegraded)
	}
	want := map[string][4]int64{"a": {1, 0, 0, 0}, "b": {1, 0, 0, 0}, "c": {0, 1, 1, 1}} // healthy, errors, failovers, cooldowns
	for _, n := range health.Nodes {
		if n.Errors == nil || n.Failovers == nil || n.Cooldowns == nil {
			t.Fatalf("node %s lacks its counts: %s", n.Name, r.body)
		}
		got := [4]int64{map[bool]int64{true: 1}[n.Healthy], *n.Errors, *n.Failovers, *n.Cooldowns}
		if got != want[n.Name] {
			t.Errorf("node %s: healthy, errors, failovers, cooldowns %v, want %v", n.Name, got, want[n.Name])
		}
	}
	mcp := g.Health(t.Context())
	if mcp.Status != gateway.HealthDegraded {
		t.Errorf("system1_health %s: %s", mcp.Status, mcp.Summary)
	}
	for i, n := range mcp.Nodes {
		h := health.Nodes[i]
		if n.Name != h.Name || n.Healthy != h.Healthy || n.Errors != *h.Errors || n.Failovers != *h.Failovers || n.Cooldowns != *h.Cooldowns || (!n.Healthy && !strings.Contains(n.CoolReason, "refused")) {
			t.Errorf("system1_health's node %+v; /health's %+v", n, h)
		}
	}
}
