package fleet

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"system1/internal/engine"
)

// A request over the budget on every node is refused before any call,
// each question with a rejection naming the cost and the budget; a node
// whose budget the request exceeds is passed over for one within it.
func TestBudgetRefusesBeforeAnyCall(t *testing.T) {
	r, fakes, _ := newTestRouter(255, 255)
	req := choiceRequest("m", 255)
	for range 63 {
		q := req.Questions[0]
		req.Questions = append(req.Questions, q)
	}
	res, err := r.Decide(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range res.Questions {
		var f *engine.Failure
		if !errors.As(a.Err, &f) || f.Kind != engine.Rejected || f.Status != http.StatusUnprocessableEntity ||
			!strings.Contains(f.Error(), "costs 896 engine calls") || !strings.Contains(f.Error(), "this question costs 14") || !strings.Contains(f.Error(), "budget of 256") {
			t.Fatalf("question %d: %v", i, a.Err)
		}
	}
	if fakes[0].count()+fakes[1].count() != 0 {
		t.Fatalf("%d calls for a request refused up front", fakes[0].count()+fakes[1].count())
	}

	// Node a's budget is below the request's 14 calls, b's is not: b answers.
	r.nodes[0].MaxEngineCalls, r.nodes[1].MaxEngineCalls = 13, 14
	one := choiceRequest("m", 255)
	a := decide(t, r, one)
	if a.Err != nil || a.Node != "b" || fakes[0].count() != 0 || fakes[1].count() != 14 {
		t.Fatalf("node %q, %v; calls a %d, b %d", a.Node, a.Err, fakes[0].count(), fakes[1].count())
	}
}
