package mcpserver_test

import (
	"fmt"
	"testing"

	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// system1_decide says what its answer cost: the tokens and the request
// the priced hosted endpoint billed at its price; 0 for the cache's
// repeat; null over a node with no price, never a made-up 0.
func TestDecideCostOverMCP(t *testing.T) {
	up := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	// The priced node's price below: a dollar and two a million tokens,
	// and 0.0005 a request, in pico-dollars.
	p := decision.Price{InputPerToken: 1_000_000, OutputPerToken: 2_000_000, PerRequest: 500_000_000}
	cost, _ := p.Cost(fakeengine.SystemOneInputTokens, fakeengine.SystemOneOutputTokens, 1)
	want := cost.String()
	for _, tc := range []struct {
		name, node, want string
	}{
		{"priced", fmt.Sprintf("{name: up, url: %s, dialect: systemone, models: [jev-latest], price: {input_per_mtok: 1, output_per_mtok: 2, per_request: 0.0005}}", up.URL), want},
		{"unpriced", fmt.Sprintf("{name: up, url: %s, dialect: systemone, models: [jev-latest]}", up.URL), "<null>"},
		{"unpriced engine", fmt.Sprintf("{name: up, url: %s, dialect: llamacpp, models: [jev-latest]}", f.URL), "<null>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "")
			w.write("config.yaml", noCanary+"cache: {entries: 10}\ngateway:\n  threshold: 0\n  chain:\n    - {name: hosted, model: jev-latest}\nnodes:\n  - "+tc.node+"\n")
			s := w.start()
			ask := func() *gateway.Response {
				return s.decide(map[string]any{"question": "Which team?", "options": []string{"billing", "technical", "sales"}})
			}
			first, again := ask(), ask()
			if first.Status != gateway.Decided || first.Cache != "miss" || str(first.Cost) != tc.want {
				t.Fatalf("first: status %s, cache %q, cost %s; want %s", first.Status, first.Cache, str(first.Cost), tc.want)
			}
			if again.Cache != "hit" || str(again.Cost) != "0" {
				t.Errorf("the repeat: cache %q, cost %s; want a hit costing 0", again.Cache, str(again.Cost))
			}
		})
	}
}
