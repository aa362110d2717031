package fleet

import (
	"context"
	"net/http"
	"testing"

	"system1/internal/config"
	"system1/internal/testengine"
)

// Two real llama-servers serve the tiny model; the one the state hashes to
// is stopped, and its questions move to the other, which gives the same
// distribution (same model, temperature 0).
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
	r := New(nodes, Options{})
	ctx := context.Background()
	r.Refresh(ctx)
	if got := r.Serving(testengine.Model); len(got) != 2 {
		t.Fatalf("%d nodes serve %s; both list it", len(got), testengine.Model)
	}
	req := choiceRequest(testengine.Model, 3)

	before := decide(t, r, req)
	if before.Err != nil {
		t.Fatalf("before: %v", before.Err)
	}
	servers := map[string]*testengine.Server{"first": first, "second": second}
	other := map[string]string{"first": "second", "second": "first"}[before.Node]
	if again := decide(t, r, req); again.Node != before.Node {
		t.Fatalf("the same state went to %s, then %s", before.Node, again.Node)
	}
	servers[before.Node].Stop()
	after := decide(t, r, req)
	if after.Err != nil || after.Node != other {
		t.Fatalf("after stopping %s: node %q err %v (%s)", before.Node, after.Node, after.Err, outcomes(after))
	}
	if got, want := outcomes(after), before.Node+":unavailable "+other+":ok"; got != want {
		t.Fatalf("attempts %q, want %q", got, want)
	}
	for _, n := range nodes {
		if s := n.State(r.now()); n.Name == before.Node && (s.Healthy || s.CoolReason == "") {
			t.Fatalf("the stopped node is not cooled down: %+v", s)
		}
	}
	for i := range before.Dist {
		if d := before.Dist[i] - after.Dist[i]; d > 1e-3 || d < -1e-3 {
			t.Fatalf("same model, different answers: %v vs %v", before.Dist, after.Dist)
		}
	}
}
