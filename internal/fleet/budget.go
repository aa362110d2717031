package fleet

import (
	"fmt"
	"net/http"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/engine/openai"
)

// labelKnower is an engine that can say which labels it would give a
// question without a call: the dialects whose labels are fixed, and
// llama.cpp once its tokenizer has been asked about the candidates.
type labelKnower interface {
	KnownLabels(model string, candidates []string, want int) ([]string, bool)
}

// Every dialect knows its labels (llama.cpp once asked).
var (
	_ labelKnower = (*llamacpp.Engine)(nil)
	_ labelKnower = (*ollama.Engine)(nil)
	_ labelKnower = (*openai.Engine)(nil)
)

// calls is the number of engine calls reading q of model once costs on an
// engine: the rounds engine.Ask goes in, from the node's per-call label
// cap and the labels the engine has for the options. Until llama.cpp's
// tokenizer has been asked about a model's candidates (the first question
// of that size), a label is assumed for every option; a model with fewer
// single-token labels goes in more rounds.
func (b *engineBackend) calls(model string, q decision.Question) int {
	opts := len(q.Options)
	per := b.e.Caps().PerCall
	if k, ok := b.e.(labelKnower); ok {
		if labels, ok := k.KnownLabels(model, engine.Candidates(q), opts); ok && len(labels) < opts && (per == 0 || len(labels) < per) {
			per = len(labels)
		}
	}
	return engine.Calls(opts, per)
}

func (b *engineBackend) spends() string {
	if per := b.e.Caps().PerCall; per > 0 {
		return fmt.Sprintf("reads %d labels a call", per)
	}
	return "reads any number of labels a call"
}

// An upstream forwards a request's questions in one call, which the
// request pays (see requestCost): a question costs none of its own.
func (b *upstreamBackend) calls(string, decision.Question) int { return 0 }
func (b *upstreamBackend) spends() string                      { return "forwards a request in one call" }

// An unusable node makes no call.
func (unusable) calls(string, decision.Question) int { return 0 }
func (unusable) spends() string                      { return "makes no call" }

// questionCost is what question q of req costs on node n: its calls once
// per order of its options that d asks, and extra more for a content-free
// reading p does not have yet.
func (n *Node) questionCost(model string, req decision.Request, q decision.Question, d Debias, p *priors) (cost, orders, extra int) {
	orders = d.orders(req, q)
	calls := n.Backend.calls(model, q)
	if p.needsContentFree(model, req, q, orders) {
		extra = calls * orders
	}
	return calls*orders + extra, orders, extra
}

// requestCost is what the questions at take of req cost on node n: the
// sum of their costs, and at least the one call that carries them.
func (n *Node) requestCost(model string, req decision.Request, take []int, d Debias, p *priors) int {
	cost := 0
	for _, i := range take {
		c, _, _ := n.questionCost(model, req, req.Questions[i], d, p)
		cost += c
	}
	return max(cost, 1)
}

// budget is the most engine calls one request may cost on the node.
func (n *Node) budget() int {
	if n.MaxEngineCalls > 0 {
		return n.MaxEngineCalls
	}
	return config.DefaultMaxEngineCalls
}

// overBudget checks a request's cost against every serving node's budget
// before any call is made: when no node would take the whole request
// within its budget, each question gets a rejection naming the budget and
// the cost, the caller's to fix, as a 422. It returns whether it refused.
func (r *Router) overBudget(serving []*Node, model string, req decision.Request, res *Result) bool {
	all := allQuestions(len(req.Questions))
	var cheapest *Node
	cost := 0
	for _, n := range serving {
		c := n.requestCost(model, req, all, r.debias, r.prior)
		if c <= n.budget() {
			return false
		}
		if cheapest == nil || c < cost {
			cheapest, cost = n, c
		}
	}
	if cheapest == nil {
		return false
	}
	n := cheapest
	for i, q := range req.Questions {
		qc, orders, extra := n.questionCost(model, req, q, r.debias, r.prior)
		res.Questions[i].Err = &engine.Failure{Kind: engine.Rejected, Status: http.StatusUnprocessableEntity, Err: fmt.Errorf(
			"the request costs %d engine calls on node %s (%s, which %s; this question costs %d%s%s), over its budget of %d calls a request (max_engine_calls); ask fewer questions or give them fewer options%s%s",
			cost, n.Name, n.Dialect, n.Backend.spends(), qc, ordersNote(orders), priorNote(extra), n.budget(), ordersAdvice(orders), priorAdvice(extra))}
	}
	return true
}

// ordersNote says that a question's cost counts its orders.
func ordersNote(orders int) string {
	if orders <= 1 {
		return ""
	}
	return fmt.Sprintf(", over %d orders of its options for debias permute", orders)
}

// ordersAdvice names the other way to cut a debiased request's cost.
func ordersAdvice(orders int) string {
	if orders <= 1 {
		return ""
	}
	return ", or ask with debias off"
}

// priorNote says that a question's cost counts its content-free reading.
func priorNote(extra int) string {
	if extra == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them for the content-free reading of prior content_free", extra)
}

// priorAdvice names the other way to cut a content-free request's cost.
func priorAdvice(extra int) string {
	if extra == 0 {
		return ""
	}
	return ", or ask with prior off or batch"
}
