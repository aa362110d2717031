package fleet

import (
	"context"
	"net/http"
	"testing"
	"time"

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

// A llama-server restarted with more slots (-np) is read again once it is
// back: its calls are bounded and pinned by the slots it runs now, and the
// node shows them, where system1 kept the count read before the restart
// (one task at a time on a server of four slots, /health showing 1) until
// it was itself restarted.
func TestRealEngineRestartedWithOtherSlotsIsReadAgain(t *testing.T) {
	srv := testengine.Start(t, 1)
	n, err := NewNode(config.Node{Name: "n", URL: srv.URL, Dialect: "llamacpp"}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{Policy: Policy{AllowedFails: 3, Window: time.Minute, Cooldown: 10 * time.Millisecond}})
	r.Refresh(context.Background())
	req := choiceRequest(testengine.Model, 3)
	if a := decide(t, r, req); a.Err != nil {
		t.Fatal(a.Err)
	}
	if s := r.States()[0].Slots; s != 1 {
		t.Fatalf("the node shows %d slots, want the server's 1", s)
	}
	srv.Stop()
	if a := decide(t, r, req); a.Err == nil {
		t.Fatal("a stopped server answered")
	}
	srv.Restart(t, testengine.Config{Slots: 4})
	time.Sleep(50 * time.Millisecond) // the node's cooldown
	if a := decide(t, r, req); a.Err != nil {
		t.Fatal(a.Err)
	}
	if s := r.States()[0].Slots; s != 4 {
		t.Errorf("the node shows %d slots after its server came back with 4", s)
	}
}
