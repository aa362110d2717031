package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
)

// A score's levels, and a noul's two sides, are read in one call: they
// do not go in rounds. A node whose max_labels reads fewer (a hosted API
// that reports 5 alternatives) is passed over for such a question, as a
// node whose max_options is under a choice's options is, so that the
// next node answers it; where no node reads it, it is the caller's
// question to change, naming max_labels. Before, the first node refused
// it as the caller's ("model fake has 5 usable single-token labels for 6
// options") and no other node was asked.
func TestNodeReadingTooFewLabelsIsPassedOver(t *testing.T) {
	score := func(levels int) decision.Question {
		q := decision.Question{ID: "q", Kind: decision.Score}
		for i := range levels {
			k := string(rune('0' + i))
			q.Options = append(q.Options, decision.Option{Key: k, Name: "level " + k})
		}
		return q
	}
	noul := decision.Question{ID: "q", Kind: decision.Noul, Options: []decision.Option{{Key: "true"}, {Key: "false"}}}
	for _, tc := range []struct {
		name     string
		nodes    []config.Node
		q        decision.Question
		node     string // the node that answers; "" for none
		rejected string // what a refused question's error says
	}{
		{"score over a's labels goes to b", []config.Node{{Name: "a", MaxLabels: 5}, {Name: "b", Priority: 1}}, score(6), "b", ""},
		{"score within a's labels stays on a", []config.Node{{Name: "a", MaxLabels: 5}, {Name: "b", Priority: 1}}, score(5), "a", ""},
		{"noul over a's one label goes to b", []config.Node{{Name: "a", MaxLabels: 1}, {Name: "b", Priority: 1}}, noul, "b", ""},
		{"score over every node's labels", []config.Node{{Name: "a", MaxLabels: 5}, {Name: "b", MaxLabels: 4, Priority: 1}}, score(6), "", "max_labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []*Node
			for _, c := range tc.nodes {
				f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.OpenAI})
				t.Cleanup(f.Close)
				c.URL, c.Dialect, c.Models = f.URL, "openai", []string{fakeengine.DefaultModel}
				n, err := NewNode(c, func(string) string { return "" }, http.DefaultClient)
				if err != nil {
					t.Fatal(err)
				}
				nodes = append(nodes, n)
			}
			r := New(nodes, Options{})
			res, err := r.Decide(context.Background(), decision.Request{Model: fakeengine.DefaultModel, State: json.RawMessage(`"s"`), Questions: []decision.Question{tc.q}})
			if err != nil {
				t.Fatal(err)
			}
			a := res.Questions[0]
			if tc.node != "" {
				if a.Err != nil || a.Node != tc.node {
					t.Fatalf("answered by %q (%v), want %s; attempts %+v", a.Node, a.Err, tc.node, a.Attempts)
				}
				return
			}
			f := engine.Classify(a.Err)
			if f == nil || f.Kind != engine.Rejected || !strings.Contains(a.Err.Error(), tc.rejected) || len(a.Attempts) != 0 {
				t.Fatalf("error %v, attempts %+v; want a rejection naming %s before any call", a.Err, a.Attempts, tc.rejected)
			}
		})
	}
}
