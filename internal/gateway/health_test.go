package gateway

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"system1/internal/decision"
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
	if got := fleet.FleetStatus(g.opt.Answer.States()); got != fleet.FleetDegraded {
		t.Errorf("the fleet's status %s, want %s", got, fleet.FleetDegraded)
	}
}

// system1_capabilities lists every model the nodes serve, and each alias
// of one, with what it can be asked: the question types, no images, and
// the limits the model's nodes and the configuration set.
func TestCapabilitiesModels(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}})
	t.Cleanup(f.Close)
	g := gatewayFor(t, fmt.Sprintf("max_questions: 64\naliases: {jev-latest: tiny}\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny], max_options: 30}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
	c := g.Capabilities(t.Context())
	want := decision.Capabilities{QuestionTypes: []string{"noul", "choice", "score"}, MaxQuestions: 64, MaxChoices: 30, MaxLevels: 10, MaxStateBytes: decision.DefaultLimits().MaxStateBytes}
	if len(c.Models) != 2 || c.Models[0].Model != "tiny" || c.Models[1].Model != "jev-latest" || c.Models[1].AliasOf != "tiny" {
		t.Fatalf("models %+v", c.Models)
	}
	for _, m := range c.Models {
		if !reflect.DeepEqual(m.Capabilities, want) {
			t.Errorf("%s: %+v, want %+v", m.Model, m.Capabilities, want)
		}
	}
}
