package fleet

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"sync"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/engine"
)

// Attempt is one try of one question on one node.
type Attempt struct {
	Node    string        `json:"node"`
	Outcome string        `json:"outcome"` // ok, or a failure kind
	Latency time.Duration `json:"latency_ns"`
	Detail  string        `json:"detail,omitempty"`
}

// Answered is one question's outcome: answered by Node, or Err.
type Answered struct {
	engine.Outcome
	// Abstain, when not empty, says why the node itself declined to decide
	// (a System One upstream's abstention gate); the distribution is still
	// its reading.
	Abstain string
	// Prior is the label prior to divide out of the distribution (the
	// prior step), nil for none; PriorVersion names it.
	Prior        decision.Distribution
	PriorVersion string
	Node         string
	// Fingerprint is the build of the model that Node served the answer
	// from, and Since when it has served it, as the background probes
	// last saw them; "" and zero when fingerprints are off or the model
	// was not probed on the node yet.
	Fingerprint string
	Since       time.Time
	Attempts    []Attempt
	// Price is what Node charges, nil when it is not known; Requests the
	// requests forwarded to a hosted endpoint that this question's usage
	// counts (1 on the first question of each forwarded request, which
	// carries the request's usage; 0 on an engine's). The answer path
	// prices the answer by them (answer.Question.Cost).
	Price    *decision.Price
	Requests int
	Err      error
}

// Result is a request answered across the fleet.
type Result struct {
	Model     string     // the model id the engines report
	Questions []Answered // aligned with the request's questions
}

// Decide answers every question of req. The questions go together to the
// first node in the request's order (see order) that takes them; engine
// nodes answer them concurrently, a System One upstream in one forwarded
// request. Questions that fail there (refusal, timeout, busy, a 5xx or a
// malformed reply) move on to the next node, and so on until every
// question is answered or no node is left. A question an engine refused as
// a bad request is not tried elsewhere.
func (r *Router) Decide(ctx context.Context, req decision.Request) (*Result, error) {
	model := r.Resolve(req.Model)
	serving := r.Serving(req.Model)
	if len(serving) == 0 {
		return nil, fmt.Errorf("model %q: %w", req.Model, ErrUnknownModel)
	}
	res := &Result{Questions: make([]Answered, len(req.Questions))}
	if r.overBudget(serving, model, req, res) {
		return res, nil
	}
	pending := engine.Indices(0, len(req.Questions))
	settled := make([]bool, len(req.Questions)) // answered, or rejected as a bad request
	var left *Node                              // the node the pending questions last failed on
	for _, n := range r.order(r.withModel(serving, model), req.State, engine.Throughput(ctx)) {
		if ctx.Err() != nil {
			break
		}
		take := slices.DeleteFunc(slices.Clone(pending), func(i int) bool { return !n.takes(req.Questions[i]) })
		if len(take) == 0 || r.requestCost(n, model, req, take) > n.budget() {
			continue
		}
		// A failover is a move after a failure: questions left to this
		// node because the last did not take them (their options over its
		// max_options) moved after none.
		if left != nil {
			r.obs.Failover(model)
			left.failovers.Add(1)
		}
		left = nil
		var failure *engine.Failure
		probed := r.probeOnUse(n, model)
		answers := r.answer(ctx, n, model, req, take)
		if probed != nil {
			select {
			case <-probed:
			case <-ctx.Done():
			}
		}
		fingerprint, since := n.served(model)
		ok := 0
		for j, got := range answers {
			i := take[j]
			a := &res.Questions[i]
			if got.sent {
				a.Attempts = append(a.Attempts, got.attempt)
			}
			if got.err == nil {
				got.Node, got.Fingerprint, got.Since, got.Price, got.Attempts = n.Name, fingerprint, since, n.Price, a.Attempts
				*a = got.Answered
				settled[i] = true
				ok++
				continue
			}
			a.Err = fmt.Errorf("node %s: %w", n.Name, got.err)
			settled[i] = got.err.Kind == engine.Rejected
			// The failure blamed is one that speaks of the node, whatever
			// the order of the questions: a question rejected as the
			// caller's or one no label was ranked for must not hide
			// another's 5xx or timeout.
			if failure == nil || speaks(got.err) {
				failure = got.err
			}
			if !settled[i] {
				left = n
			}
		}
		r.countServed(n, model, ok)
		// A call the caller gave up on says nothing about the node.
		if failure != nil && ctx.Err() == nil {
			r.blame(n, model, failure)
		}
		pending = slices.DeleteFunc(pending, func(i int) bool { return settled[i] })
		if len(pending) == 0 {
			break
		}
	}
	for _, i := range pending {
		a := &res.Questions[i]
		switch {
		case ctx.Err() != nil && a.Err != nil:
			a.Err = fmt.Errorf("%w (after %w)", ctx.Err(), a.Err)
		case a.Err == nil:
			a.Err = r.noNode(ctx, serving, model, req.Questions[i])
		}
	}
	// Every answer joins its signature's batch estimate, whatever this
	// request asked, so that a request asking for batch calibration finds
	// it warm.
	for i := range res.Questions {
		if a := &res.Questions[i]; a.Err == nil && a.Dist != nil { // a refusal has no reading
			r.prior.observe(req, req.Questions[i], a)
		}
	}
	if i := slices.IndexFunc(res.Questions, func(a Answered) bool { return a.Err == nil }); i >= 0 {
		res.Model = res.Questions[i].Model
	}
	return res, nil
}

// overBudget checks a request's cost against every serving node's budget
// before any call is made: when no node would take the whole request
// within its budget, each question gets a rejection naming the budget and
// the cost, the caller's to fix, as a 422. It returns whether it refused.
func (r *Router) overBudget(serving []*Node, model string, req decision.Request, res *Result) bool {
	all := engine.Indices(0, len(req.Questions))
	var cheapest *Node
	cost := 0
	for _, n := range serving {
		c := r.requestCost(n, model, req, all)
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
		qc, orders, extra := r.questionCost(n, model, req, q)
		note, advice := costNotes(orders, extra)
		res.Questions[i].Err = &engine.Failure{Kind: engine.Rejected, Status: http.StatusUnprocessableEntity, Err: fmt.Errorf(
			"the request costs %d engine calls on node %s (%s, which %s; this question costs %d%s), over its budget of %d calls a request (max_engine_calls); ask fewer questions or give them fewer options%s",
			cost, n.Name, n.Dialect, n.Backend.spends(), qc, note, n.budget(), advice)}
	}
	return true
}

// requestCost is what the questions at take of req cost on node n: the
// sum of their costs, and at least the one call that carries them.
func (r *Router) requestCost(n *Node, model string, req decision.Request, take []int) int {
	cost := 0
	for _, i := range take {
		c, _, _ := r.questionCost(n, model, req, req.Questions[i])
		cost += c
	}
	return max(cost, 1)
}

// questionCost is what question q of req costs on node n: its calls once
// per order of its options that the debiasing asks, and extra more for a
// content-free reading the priors do not have yet.
func (r *Router) questionCost(n *Node, model string, req decision.Request, q decision.Question) (cost, orders, extra int) {
	orders = r.debias.orders(req, q)
	calls := n.Backend.calls(model, q)
	if r.prior.needsContentFree(n, model, req, q, orders) {
		extra = calls * orders
	}
	return calls*orders + extra, orders, extra
}

// budget is the most engine calls one request may cost on the node.
func (n *Node) budget() int { return cmp.Or(max(n.MaxEngineCalls, 0), config.DefaultMaxEngineCalls) }

// costNotes say what a question's cost counts besides one reading (its
// orders, its content-free reading), and the other ways to cut them.
func costNotes(orders, extra int) (note, advice string) {
	if orders > 1 {
		note += fmt.Sprintf(", over %d orders of its options for debias permute", orders)
		advice += ", or ask with debias off"
	}
	if extra > 0 {
		note += fmt.Sprintf(", %d of them for the content-free reading of prior content_free", extra)
		advice += ", or ask with prior off or batch"
	}
	return note, advice
}

// withModel leaves out of nodes those on which model rests.
func (r *Router) withModel(nodes []*Node, model string) []*Node {
	now := r.now()
	return slices.DeleteFunc(slices.Clone(nodes), func(n *Node) bool {
		_, resting := n.modelResting(model, now)
		return resting
	})
}

// order lists the healthy nodes to try for a request over state: by
// priority, and within a priority the node the state hashes to first
// (rendezvous hashing, so that questions over one state reuse one node's
// prompt cache) unless all its slots are taken, then the others by fewest
// calls in flight and waiting, ties in configured order. For row-wise
// work (bulk) a slot a state holds counts as taken, and the states
// holding slots as load: a state goes to a node with a slot free rather
// than wait for one on its own node.
func (r *Router) order(serving []*Node, state []byte, bulk bool) []*Node {
	now := r.now()
	out := slices.DeleteFunc(slices.Clone(serving), func(n *Node) bool { return !n.State(now).Healthy })
	load := func(n *Node) int {
		in, q := n.slots.load()
		if bulk {
			in += n.held()
		}
		return in + q
	}
	full := func(n *Node) bool { return n.slots.saturated() || (bulk && n.held() >= n.knownSlots()) }
	slices.SortStableFunc(out, func(a, b *Node) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(load(a), load(b)))
	})
	key := affinity(state)
	for lo := 0; lo < len(out); {
		hi := lo
		for hi < len(out) && out[hi].Priority == out[lo].Priority {
			hi++
		}
		best := lo
		for i := lo; i < hi; i++ {
			if rendezvous(key, out[i].Name) > rendezvous(key, out[best].Name) {
				best = i
			}
		}
		if !full(out[best]) {
			n := out[best]
			copy(out[lo+1:best+1], out[lo:best])
			out[lo] = n
		}
		lo = hi
	}
	return out
}

// affinity hashes a state for rendezvous hashing.
func affinity(state []byte) uint64 {
	h := fnv.New64a()
	h.Write(state)
	return h.Sum64()
}

// rendezvous scores a node for a state: the highest score wins, and a
// node leaving or joining moves only the states it wins.
func rendezvous(key uint64, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	x := key ^ h.Sum64()
	// splitmix64's finaliser spreads the bits of the combined key.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// answer is one question's result from one node: its attempt, and what
// Decide keeps of it when the node answered (the backend fills the
// outcome, abstention, prior and requests; Decide the rest), or err, why
// the node did not. A question that was not sent (sent false) carries the
// failure that kept it from the node, and no attempt.
type answer struct {
	Answered
	attempt Attempt
	err     *engine.Failure
	sent    bool
}

// answer asks node n the questions take of req through its backend.
func (r *Router) answer(ctx context.Context, n *Node, model string, req decision.Request, take []int) []answer {
	sub := req
	sub.Model = model
	sub.Questions = engine.Pick(req.Questions, take)
	key := affinity(req.State)
	ctx = engine.WithGate(ctx, gate{n: n, share: n.slots.share()})
	out := n.Backend.ask(&caller{ctx: ctx, r: r, n: n, model: model, warm: r.warm.seen(n.Name, key, r.now())}, sub)
	if slices.ContainsFunc(out, func(a answer) bool { return a.err == nil }) {
		r.warm.add(n.Name, key, r.now())
	}
	return out
}

// warmStates remembers which states each node answered lately, so that
// questions over a state whose prefix the node probably still caches can
// go to it all at once.
type warmStates struct {
	mu    sync.Mutex
	at    map[warmKey]time.Time
	swept time.Time
}

type warmKey struct {
	node  string
	state uint64
}

// Bounds on what is remembered: an engine's prompt cache holds a state
// for minutes at most, and a few thousand states are plenty.
const (
	warmFor   = 2 * time.Minute
	warmLimit = 4096
)

func (w *warmStates) seen(node string, state uint64, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.at[warmKey{node, state}]
	return ok && now.Sub(t) < warmFor
}

func (w *warmStates) add(node string, state uint64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[warmKey]time.Time{}
	}
	if len(w.at) >= warmLimit || now.Sub(w.swept) > warmFor {
		for k, t := range w.at {
			if now.Sub(t) >= warmFor {
				delete(w.at, k)
			}
		}
		if len(w.at) >= warmLimit {
			clear(w.at) // all fresh: start over rather than grow
		}
		w.swept = now
	}
	w.at[warmKey{node, state}] = now
}

// blame records a failure of node n serving model, and cools down what it
// points at. A 404 on a call for one model is that model's problem on a
// multi-model engine (Ollama answers 404 for a model it has not pulled):
// the pair rests, not the node, so a caller naming a missing model cannot
// keep the node down for every other model. A reading in which the model
// ranked none of the labels is honest and well-formed, and an upstream's
// answer that fails the checks is a shape the question provoked: neither
// counts against anything. On a pool, an error status its router answered
// with (a 5xx) is one engine's failure behind a router that still routes:
// it counts toward a cooldown, as a timeout does, rather than cooling the
// whole pool. Everything else is the node's, by the policy (failedLocked).
func (r *Router) blame(n *Node, model string, f *engine.Failure) {
	if !speaks(f) {
		return
	}
	now := r.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case f.Kind == engine.Unavailable && f.Status == http.StatusNotFound:
		r.coolModelLocked(n, model, now, f.Error())
	case n.Pool && f.Kind == engine.Unavailable && f.Status != 0:
		r.countLocked(n, f, now)
	default:
		r.failedLocked(n, f, now)
	}
}

// speaks reports whether f says anything of the node, which blame acts
// on: not the caller's request, a full queue, a caller gone, a reading
// of no label or a provoked answer.
func speaks(f *engine.Failure) bool {
	switch {
	case f.Uninformative || f.Provoked:
		return false
	case f.Kind == engine.Rejected, f.Kind == engine.Busy, f.Kind == engine.Canceled:
		return false
	}
	return true
}

// coolModelLocked rests model on n for the policy's cooldown from now;
// the caller holds n.mu.
func (r *Router) coolModelLocked(n *Node, model string, now time.Time, why string) {
	until := now.Add(r.policy.Cooldown)
	if n.modelCool == nil {
		n.modelCool = map[string]ModelCooldown{}
	}
	if c, ok := n.modelCool[model]; !ok || until.After(c.Until) {
		n.modelCool[model] = ModelCooldown{Model: model, Until: until, Reason: why}
	}
}

// takes reports whether n can be asked q: a choice's options within the
// node's max_options, and read by its backend.
func (n *Node) takes(q decision.Question) bool {
	return n.holds(q) && n.Backend.reads(q)
}

// holds reports whether q is within n's max_options, which caps a
// choice's options alone: a score's levels and a noul's sides are read as
// any question's labels are.
func (n *Node) holds(q decision.Question) bool {
	return q.Kind != decision.Choice || len(q.Options) <= n.MaxOptions
}

// noNode explains why a question found no node to try.
func (r *Router) noNode(ctx context.Context, serving []*Node, model string, q decision.Question) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	options := len(q.Options)
	if !slices.ContainsFunc(serving, func(n *Node) bool { return n.holds(q) }) {
		return &engine.Failure{Kind: engine.Rejected, Err: fmt.Errorf("%d options exceed every node's option cap", options)}
	}
	if !slices.ContainsFunc(serving, func(n *Node) bool { return n.takes(q) }) {
		return &engine.Failure{Kind: engine.Rejected, Err: fmt.Errorf("the %d options of a %s exceed the labels every node reads in one call (its max_labels), and only a choice's options go in rounds", options, q.Kind)}
	}
	now := r.now()
	var states []string
	for _, n := range serving {
		states = append(states, r.resting(n, model, now))
	}
	err := fmt.Errorf("every node is cooling down: %v", states)
	// Where every node rests as its 429 asked, the question is rate
	// limited until the soonest of those rests ends, which the caller is
	// told as a 429's Retry-After is.
	if wait, ok := r.limitedRest(serving, model, now); ok {
		return &engine.Failure{Kind: engine.RateLimited, RetryAfter: wait, Err: err}
	}
	return &engine.Failure{Kind: engine.Unavailable, Err: err}
}

// limitedRest reports whether every node of serving rests at now for the
// pause its 429 asked (not a model's rest, nor a down node's), and how
// long until the first of them is asked again.
func (r *Router) limitedRest(serving []*Node, model string, now time.Time) (wait time.Duration, ok bool) {
	for _, n := range serving {
		if _, resting := n.modelResting(model, now); resting {
			return 0, false
		}
		n.mu.Lock()
		until, limited := n.coolUntil, n.coolLimited && now.Before(n.coolUntil)
		n.mu.Unlock()
		if !limited {
			return 0, false
		}
		if d := until.Sub(now); !ok || d < wait {
			wait, ok = d, true
		}
	}
	return wait, ok
}

// resting explains why node n takes no question for model at now.
func (r *Router) resting(n *Node, model string, now time.Time) string {
	if c, ok := n.modelResting(model, now); ok {
		return fmt.Sprintf("%s: model %s cooling down until %s (%s)", n.Name, model, c.Until.Format(time.RFC3339), c.Reason)
	}
	s := n.State(now)
	if s.Healthy { // passed over: another node could take what this one could not
		return fmt.Sprintf("%s not tried: the question's options or the request's engine calls are over its max_options, max_labels or max_engine_calls", s.Name)
	}
	return fmt.Sprintf("%s cooling down until %s (%s)", s.Name, s.CoolUntil.Format(time.RFC3339), s.CoolReason)
}
