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
	for range 299 { // 300 questions of 14 calls: 4200, over the default 4096
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
			!strings.Contains(f.Error(), "costs 4200 engine calls") || !strings.Contains(f.Error(), "this question costs 14") || !strings.Contains(f.Error(), "budget of 4096") {
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

// Each order debiasing asks is counted in the budget: a request within it
// asked once is over it asked over four orders, and refused up front
// with what to change.
func TestBudgetCountsDebiasOrders(t *testing.T) {
	r, fakes, _ := newTestRouter(255, 255)
	req := choiceRequest("m", 255) // 14 calls on these nodes
	for _, n := range r.nodes {
		n.MaxEngineCalls = 50
	}
	if a := decide(t, r, req); a.Err != nil || a.Orders != 0 {
		t.Fatalf("without debias: %v, orders %d", a.Err, a.Orders)
	}
	req.Debias = "permute"
	res, err := r.Decide(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	before := fakes[0].count() + fakes[1].count()
	var f *engine.Failure
	if !errors.As(res.Questions[0].Err, &f) || f.Kind != engine.Rejected ||
		!strings.Contains(f.Error(), "costs 56 engine calls") || !strings.Contains(f.Error(), "over 4 orders") || !strings.Contains(f.Error(), "debias off") {
		t.Fatalf("debiased over budget: %v", res.Questions[0].Err)
	}
	if after := fakes[0].count() + fakes[1].count(); after != before {
		t.Fatalf("%d calls for a request refused up front", after-before)
	}
	for _, n := range r.nodes {
		n.MaxEngineCalls = 56
	}
	a := decide(t, r, req)
	if a.Err != nil || a.Orders != 4 || fakes[0].count()+fakes[1].count()-before != 56 {
		t.Fatalf("within budget: %v, orders %d, %d calls", a.Err, a.Orders, fakes[0].count()+fakes[1].count()-before)
	}
}
