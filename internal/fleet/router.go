package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
)

// Observer is told what the router does, for metrics.
type Observer interface {
	Attempt(node, model, outcome string, d time.Duration)
	Failover(model string)
	Cooldown(node string)
}

type noObserver struct{}

func (noObserver) Attempt(string, string, string, time.Duration) {}
func (noObserver) Failover(string)                               {}
func (noObserver) Cooldown(string)                               {}

// Router answers questions across nodes.
type Router struct {
	nodes   []*Node
	aliases map[string]string
	policy  Policy
	obs     Observer
	now     func() time.Time

	seenMu    sync.Mutex
	firstSeen map[string]time.Time

	warm warmStates

	debias       Debias
	prior        *priors
	maxQuestions int // 0: decision.DefaultMaxQuestions
}

// Options configure a Router. The zero value routes with DefaultPolicy,
// no aliases, no debiasing or prior correction, and
// decision.DefaultMaxQuestions.
type Options struct {
	// Aliases map a model id callers send to one the nodes serve; no
	// other id is ever substituted.
	Aliases map[string]string
	// Policy says when a failing node is cooled down; the zero value is
	// DefaultPolicy.
	Policy Policy
	// Observer is told what the router does, for metrics; nil observes
	// nothing.
	Observer Observer
	// Debias and Prior are the corrections of requests that do not
	// choose their own (decision.Request.Debias and Prior).
	Debias Debias
	Prior  Prior
	// MaxQuestions is the most questions one request may ask (the
	// configuration's max_questions); 0 is decision.DefaultMaxQuestions.
	MaxQuestions int
	// Getenv reads the nodes' keys in FromConfig; nil is os.Getenv.
	Getenv func(string) string
}

// New routes over nodes in their configured order.
func New(nodes []*Node, o Options) *Router {
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
	if o.Policy == (Policy{}) {
		o.Policy = DefaultPolicy
	}
	for _, n := range nodes {
		if n.slots == nil {
			n.slots = newSlots(0, 0, DefaultQueueTimeout)
		}
	}
	return &Router{nodes: nodes, aliases: o.Aliases, policy: o.Policy, obs: o.Observer, now: time.Now,
		debias: o.Debias, prior: newPriors(o.Prior), maxQuestions: max(o.MaxQuestions, 0)}
}

// Only is a router over the named nodes alone, in configured order, that
// shares their state (load, cooldowns, model lists) with r. It
// substitutes no aliases: whoever names the nodes names the model they
// serve. Names that match no node are left out.
func (r *Router) Only(names []string) *Router {
	var nodes []*Node
	for _, n := range r.nodes {
		if slices.Contains(names, n.Name) {
			nodes = append(nodes, n)
		}
	}
	o := New(nodes, Options{Policy: r.policy, Observer: r.obs, Debias: r.debias, MaxQuestions: r.maxQuestions})
	o.now, o.prior = r.now, r.prior
	return o
}

// Nodes are the router's nodes, in configured order.
func (r *Router) Nodes() []*Node { return r.nodes }

// Discover refreshes every node's model list concurrently.
func (r *Router) Discover(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Go(func() { _ = n.Discover(ctx) })
	}
	wg.Wait()
}

// Resolve maps a requested model id through the aliases.
func (r *Router) Resolve(model string) string {
	if to, ok := r.aliases[model]; ok {
		return to
	}
	return model
}

// Serving returns the nodes that serve the requested model, in configured
// order, healthy or not.
func (r *Router) Serving(model string) []*Node {
	model = r.Resolve(model)
	var out []*Node
	for _, n := range r.nodes {
		if n.Serves(model) {
			out = append(out, n)
		}
	}
	return out
}

// ErrUnknownModel means that no node serves the requested model.
var ErrUnknownModel = errors.New("no node serves this model")

// Limits returns the request limits for a model: the option cap is the
// largest among the nodes that serve it.
func (r *Router) Limits(model string) (decision.Limits, error) {
	nodes := r.Serving(model)
	if len(nodes) == 0 {
		return decision.Limits{}, fmt.Errorf("model %q: %w", model, ErrUnknownModel)
	}
	lim := decision.DefaultLimits()
	if r.maxQuestions > 0 {
		lim.MaxQuestions = r.maxQuestions
	}
	lim.MaxChoiceOptions = 0
	for _, n := range nodes {
		lim.MaxChoiceOptions = max(lim.MaxChoiceOptions, n.MaxOptions)
	}
	return lim, nil
}

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
	Attempts     []Attempt
	Err          error
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
	pending := allQuestions(len(req.Questions))
	settled := make([]bool, len(req.Questions)) // answered, or rejected as a bad request
	tried := false
	var left *Node // the node the pending questions last failed on
	for _, n := range r.order(r.withModel(serving, model), req.State) {
		if ctx.Err() != nil {
			break
		}
		var take []int
		for _, i := range pending {
			if len(req.Questions[i].Options) <= n.MaxOptions {
				take = append(take, i)
			}
		}
		if len(take) == 0 || n.requestCost(model, req, take, r.debias, r.prior) > n.budget() {
			continue
		}
		if tried {
			r.obs.Failover(model)
		}
		if left != nil {
			left.failovers.Add(1)
		}
		tried, left = true, nil
		var failure *engine.Failure
		for j, got := range r.answer(ctx, n, model, req, take) {
			i := take[j]
			a := &res.Questions[i]
			if got.sent {
				a.Attempts = append(a.Attempts, got.attempt)
			}
			if got.err == nil {
				a.Outcome, a.Abstain, a.Node, a.Err = got.outcome, got.abstain, n.Name, nil
				a.Prior, a.PriorVersion = got.prior, got.priorVersion
				settled[i] = true
				continue
			}
			a.Err = fmt.Errorf("node %s: %w", n.Name, got.err)
			settled[i] = got.err.Kind == engine.Rejected
			failure = got.err
			if !settled[i] {
				left = n
			}
		}
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
			a.Err = r.noNode(ctx, serving, model, len(req.Questions[i].Options))
		}
	}
	// Every answer joins its signature's batch estimate, whatever this
	// request asked, so that a request asking for batch calibration finds
	// it warm.
	for i := range res.Questions {
		if a := &res.Questions[i]; a.Err == nil {
			r.prior.observe(req, req.Questions[i], a)
		}
	}
	for _, a := range res.Questions {
		if a.Err == nil {
			res.Model = a.Model
			break
		}
	}
	return res, nil
}

func allQuestions(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// answer is one question's result from one node. A question that was not
// sent (sent false) carries the failure that kept it from the node, and no
// attempt.
type answer struct {
	outcome engine.Outcome
	abstain string
	// prior is the content-free reading to divide out, nil for none.
	prior        decision.Distribution
	priorVersion string
	attempt      Attempt
	err          *engine.Failure
	sent         bool
}

// answer asks node n the questions take of req through its backend.
func (r *Router) answer(ctx context.Context, n *Node, model string, req decision.Request, take []int) []answer {
	sub := req
	sub.Model = model
	sub.Questions = make([]decision.Question, len(take))
	for j, i := range take {
		sub.Questions[j] = req.Questions[i]
	}
	key := affinity(req.State)
	ctx = engine.WithGate(ctx, gate{n: n, share: n.slots.share()})
	out := n.Backend.ask(&caller{ctx: ctx, r: r, n: n, model: model, warm: r.warm.seen(n.Name, key, r.now()), debias: r.debias}, sub)
	for _, a := range out {
		if a.err == nil {
			r.warm.add(n.Name, key, r.now())
			break
		}
	}
	return out
}

// noNode explains why a question found no node to try.
func (r *Router) noNode(ctx context.Context, serving []*Node, model string, options int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	big := true
	for _, n := range serving {
		big = big && n.MaxOptions < options
	}
	if big {
		return &engine.Failure{Kind: engine.Rejected, Err: fmt.Errorf("%d options exceed every node's option cap", options)}
	}
	now := r.now()
	var states []string
	for _, n := range serving {
		states = append(states, r.resting(n, model, now))
	}
	return &engine.Failure{Kind: engine.Unavailable, Err: fmt.Errorf("every node is cooling down: %v", states)}
}

// order lists the healthy nodes to try for a request over state: by
// priority, and within a priority the node the state hashes to first
// (rendezvous hashing, so that questions over one state reuse one node's
// prompt cache) unless all its slots are taken, then the others by fewest
// calls in flight and waiting, ties in configured order.
func (r *Router) order(serving []*Node, state []byte) []*Node {
	now := r.now()
	var out []*Node
	for _, n := range serving {
		if n.State(now).Healthy {
			out = append(out, n)
		}
	}
	load := func(n *Node) int { in, q := n.slots.load(); return in + q }
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
		if !out[best].slots.saturated() {
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
