package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"system1/internal/fakeengine"
)

// Three system1 processes over the same three engine nodes send each
// state's questions to one node, whichever replica a request enters: the
// node is a stateless hash of the state (rendezvous hashing), so replicas
// agree without talking to each other. Every state is sent to every
// replica; the states spread over more than one node.
func TestReplicasAgreeOnTheNode(t *testing.T) {
	var fakes []*fakeengine.Fake
	var nodes strings.Builder
	for i := range 3 {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
		t.Cleanup(f.Close)
		fakes = append(fakes, f)
		fmt.Fprintf(&nodes, "  - {name: node%d, url: %q, dialect: llamacpp, models: [%s]}\n", i, f.URL, fakeengine.DefaultModel)
	}
	cfg := "nodes:\n" + nodes.String()
	var replicas []*server
	for range 3 {
		replicas = append(replicas, startServe(t, cfg, serveOpts{}))
	}
	c := client()
	const states = 24
	for s := range states {
		state := fmt.Sprintf("state-%02d", s)
		body := fmt.Sprintf(`{"model":%q,"state":%q,"questions":{"a":{"type":"noul"},"b":{"type":"choice","criteria":{"x":null,"y":null}}}}`,
			fakeengine.DefaultModel, state)
		for _, r := range replicas {
			if got := do(t, c, http.MethodPost, r.URL+"/v1/systemone", "", body); got.Status != http.StatusOK {
				t.Fatalf("%s through %s: %d %s", state, r.URL, got.Status, got.Body)
			}
		}
	}
	used := map[int]bool{}
	for s := range states {
		state := fmt.Sprintf("state-%02d", s)
		var at []int
		for i, f := range fakes {
			n := 0
			for _, q := range f.Inferences() {
				if strings.Contains(q.User, state) {
					n++
				}
			}
			if n > 0 {
				at = append(at, i)
			}
			if n > 0 && n != 6 {
				t.Errorf("%s: node%d got %d of its 6 questions (2 through each of 3 replicas)", state, i, n)
			}
		}
		if len(at) != 1 {
			t.Errorf("%s reached nodes %v; want one", state, at)
			continue
		}
		used[at[0]] = true
	}
	if len(used) < 2 {
		t.Errorf("%d states all went to nodes %v: the hash does not spread them", states, used)
	}
}
