package fleet

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
)

// decisionsNode is a router over one node of dialect decisions in front
// of d, with the default policy (three failures a minute cool it).
func decisionsNode(t *testing.T, d *fakeengine.Decisions) (*Router, *Node) {
	t.Helper()
	n, err := NewNode(config.Node{Name: "dec", URL: d.URL, Dialect: "decisions", Models: []string{fakeengine.DefaultModel},
		Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New([]*Node{n}, Options{}), n
}

const decisionsUsage = `"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":11}`

// A Decisions endpoint that rounds each probability to two decimals on
// its own, so that five of them sum to 0.98, is answered as the AI SDK
// accepts it (n x 0.005 off), and its distribution renormalised.
func TestDecisionsNodeRoundedOneByOne(t *testing.T) {
	d := fakeengine.StartDecisions(t, fakeengine.Reply{Model: fakeengine.DefaultModel, Raw: `{"model":"fake","answers":[` +
		`{"type":"choice","name":"c","choice":"a","confidence":0.1,"probabilities":[{"value":"a","probability":0.2},{"value":"b","probability":0.2},{"value":"c","probability":0.2},{"value":"d","probability":0.2},{"value":"e","probability":0.18}]},` +
		`{"type":"score","name":"s","score":1.96,"confidence":0.1,"probabilities":[{"value":0,"label":"0","probability":0.2},{"value":1,"label":"1","probability":0.2},{"value":2,"label":"2","probability":0.2},{"value":3,"label":"3","probability":0.2},{"value":4,"label":"4","probability":0.18}]}],` +
		decisionsUsage + `}`})
	r, _ := decisionsNode(t, d)
	var choice, score []decision.Option
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		choice = append(choice, decision.Option{Key: k, Name: k})
	}
	for i := range 5 {
		k := string(rune('0' + i))
		score = append(score, decision.Option{Key: k, Name: k})
	}
	res, err := r.Decide(t.Context(), decision.Request{Model: fakeengine.DefaultModel, State: json.RawMessage(`"s"`), Questions: []decision.Question{
		{ID: "c", Kind: decision.Choice, Instructions: json.RawMessage(`"?"`), Options: choice},
		{ID: "s", Kind: decision.Score, Instructions: json.RawMessage(`"?"`), Options: score}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range res.Questions {
		if q.Err != nil {
			t.Fatalf("a reply the AI SDK accepts: %v", q.Err)
		}
		var sum float64
		for _, p := range q.Outcome.Dist {
			sum += p
		}
		if math.Abs(sum-1) > 1e-9 || math.Abs(q.Outcome.Dist[4]-0.18/0.98) > 1e-9 {
			t.Errorf("distribution %v, want it renormalised", q.Outcome.Dist)
		}
	}
}

// A reply whose answer to one question fails the clients' checks is a
// shape that question provoked: the question fails, but however often it
// comes, the node is not cooled for it and serves every other caller.
func TestDecisionsNodeNotCooledForAnAnswer(t *testing.T) {
	d := fakeengine.StartDecisions(t, fakeengine.Reply{Model: fakeengine.DefaultModel,
		Raw: `{"model":"fake","answers":[{"type":"predicate","name":"a","probability":1.5}],` + decisionsUsage + `}`})
	r, n := decisionsNode(t, d)
	req := decision.Request{Model: fakeengine.DefaultModel, State: json.RawMessage(`"s"`), Questions: []decision.Question{
		{ID: "a", Kind: decision.Noul, Instructions: json.RawMessage(`"?"`), Options: decision.NoulOptions(nil, nil)}}}
	for i := range 2 * DefaultPolicy.AllowedFails {
		res, err := r.Decide(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Questions[0].Err == nil {
			t.Fatalf("call %d: a probability of 1.5 answered", i)
		}
	}
	if s := n.State(r.now()); !s.CoolUntil.IsZero() {
		t.Fatalf("the node cooled for one question's answers: %s", s.CoolReason)
	}
}
