package fleet

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"system1/internal/config"
	"system1/internal/fakeengine"
)

// A model is ready once a node serving it has answered a health probe;
// until then Unready names the model and its nodes, and a model no node
// is known to serve is named too. With no models named, any node that
// answered will do.
func TestUnreadyUntilANodeAnswers(t *testing.T) {
	up := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"listed"}})
	t.Cleanup(up.Close)
	down := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	downURL := down.URL
	down.Close()
	var nodes []*Node
	for _, c := range []config.Node{
		{Name: "claims", URL: downURL, Dialect: "llamacpp", Models: []string{"claimed"}},
		{Name: "lists", URL: up.URL, Dialect: "llamacpp"},
	} {
		n, err := NewNode(c, func(string) string { return "" }, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	r := New(nodes, Options{})
	before := r.Unready([]string{"claimed", "listed"})
	if len(before) != 2 || !strings.Contains(before[0], "model claimed: no node serving it has answered a health probe yet (nodes: claims)") ||
		!strings.Contains(before[1], "model listed: no node is known to serve it yet") {
		t.Errorf("before any probe: %q", before)
	}
	if got := r.Unready(nil); len(got) != 1 || !strings.Contains(got[0], "nodes: claims, lists") {
		t.Errorf("no models, before any probe: %q", got)
	}
	r.Probe(context.Background())
	if got := r.Unready([]string{"claimed", "listed"}); len(got) != 1 || !strings.HasPrefix(got[0], "model claimed:") {
		t.Errorf("after a probe, one node down: %q", got)
	}
	if got := r.Unready([]string{"listed"}); got != nil {
		t.Errorf("a model whose node answered: %q", got)
	}
	if got := r.Unready(nil); got != nil {
		t.Errorf("no models, a node answered: %q", got)
	}
}
