package fleet

import (
	"context"
	"net/http"
	"testing"

	"system1/internal/config"
	"system1/internal/testengine"
)

// Two real llama-servers serve the tiny model; the first is stopped, and
// its questions move to the second, which gives the same distribution the
// first gave (same model, temperature 0).
func TestRealEngineStoppedNodeFailsOver(t *testing.T) {
	first, second := testengine.Start(t, 1), testengine.Start(t, 1)
	var nodes []*Node
	for i, url := range []string{first.URL, second.URL} {
		n, err := NewNode(config.Node{Name: []string{"first", "second"}[i], URL: url, Dialect: "llamacpp"}, func(string) string { return "" }, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	r := NewRouter(nodes, nil, DefaultPolicy, nil)
	ctx := context.Background()
	r.Discover(ctx)
	if got := r.Serving(testengine.Model); len(got) != 2 {
		t.Fatalf("%d nodes serve %s; both list it", len(got), testengine.Model)
	}
	req := choiceRequest(testengine.Model, 3)

	before := decide(t, r, req)
	if before.Err != nil || before.Node != "first" {
		t.Fatalf("before: node %q err %v", before.Node, before.Err)
	}
	first.Stop()
	after := decide(t, r, req)
	if after.Err != nil || after.Node != "second" {
		t.Fatalf("after stopping the first node: node %q err %v (%s)", after.Node, after.Err, outcomes(after))
	}
	if got := outcomes(after); got != "first:unavailable second:ok" {
		t.Fatalf("attempts %q", got)
	}
	if s := nodes[0].State(r.now()); s.Healthy || s.CoolReason == "" {
		t.Fatalf("the stopped node is not cooled down: %+v", s)
	}
	for i := range before.Dist {
		if d := before.Dist[i] - after.Dist[i]; d > 1e-3 || d < -1e-3 {
			t.Fatalf("same model, different answers: %v vs %v", before.Dist, after.Dist)
		}
	}
}
