package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
)

// Policy says when a failing node is cooled down, after LiteLLM's router
// defaults: a node that is down (refused, or 404 for a model it claims) is
// cooled at once; one that errs or times out AllowedFails times within
// Window is cooled for Cooldown; a 429 cools it for as long as it asked.
type Policy struct {
	AllowedFails int
	Window       time.Duration
	Cooldown     time.Duration
}

// DefaultPolicy is LiteLLM's: 3 failures a minute, 5 seconds off.
var DefaultPolicy = Policy{AllowedFails: 3, Window: time.Minute, Cooldown: 5 * time.Second}

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
}

// NewRouter routes over nodes in their configured order. Aliases map a
// model id callers send to one the nodes serve; no other id is ever
// substituted. A nil observer observes nothing.
func NewRouter(nodes []*Node, aliases map[string]string, p Policy, obs Observer) *Router {
	if obs == nil {
		obs = noObserver{}
	}
	return &Router{nodes: nodes, aliases: aliases, policy: p, obs: obs, now: time.Now}
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
	Node     string
	Attempts []Attempt
	Err      error
}

// Result is a request answered across the fleet.
type Result struct {
	Model     string     // the model id the engines report
	Questions []Answered // aligned with the request's questions
}

// Unanswered returns the ids of the questions that no node answered.
func (res *Result) Unanswered(req decision.Request) []string {
	var ids []string
	for i, a := range res.Questions {
		if a.Err != nil {
			ids = append(ids, req.Questions[i].ID)
		}
	}
	return ids
}

// Decide answers every question of req concurrently; each question goes to
// the first healthy node that serves the model and has labels enough, and
// fails over to the next on refusal, timeout, a 5xx or a malformed reply.
// A question the engine rejected as a bad request is not tried elsewhere.
func (r *Router) Decide(ctx context.Context, req decision.Request) (*Result, error) {
	model := r.Resolve(req.Model)
	serving := r.Serving(req.Model)
	if len(serving) == 0 {
		return nil, fmt.Errorf("model %q: %w", req.Model, ErrUnknownModel)
	}
	res := &Result{Questions: make([]Answered, len(req.Questions))}
	var wg sync.WaitGroup
	for i, q := range req.Questions {
		wg.Go(func() { res.Questions[i] = r.ask(ctx, serving, model, req.State, q) })
	}
	wg.Wait()
	for _, a := range res.Questions {
		if a.Err == nil {
			res.Model = a.Model
			break
		}
	}
	return res, nil
}

func (r *Router) ask(ctx context.Context, serving []*Node, model string, state json.RawMessage, q decision.Question) Answered {
	var out Answered
	for i, n := range r.order(serving, len(q.Options)) {
		if err := ctx.Err(); err != nil {
			break
		}
		if i > 0 {
			r.obs.Failover(model)
		}
		start := r.now()
		o, err := r.askNode(ctx, n, model, state, q)
		at := Attempt{Node: n.Name, Latency: r.now().Sub(start)}
		if err == nil {
			at.Outcome = "ok"
			r.obs.Attempt(n.Name, model, at.Outcome, at.Latency)
			out.Attempts = append(out.Attempts, at)
			out.Outcome, out.Node, out.Err = o, n.Name, nil
			return out
		}
		f := engine.Classify(err)
		at.Outcome, at.Detail = f.Kind.String(), f.Error()
		r.obs.Attempt(n.Name, model, at.Outcome, at.Latency)
		out.Attempts = append(out.Attempts, at)
		out.Err = fmt.Errorf("node %s: %w", n.Name, f)
		r.failed(n, f)
		if f.Kind == engine.Rejected {
			return out
		}
	}
	if out.Err == nil {
		out.Err = r.noNode(ctx, serving, len(q.Options))
	} else if ctx.Err() != nil {
		out.Err = fmt.Errorf("%w (after %w)", ctx.Err(), out.Err)
	}
	return out
}

func (r *Router) askNode(ctx context.Context, n *Node, model string, state json.RawMessage, q decision.Question) (engine.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	return engine.Ask(ctx, n.Engine, model, state, q)
}

// noNode explains why a question found no node to try.
func (r *Router) noNode(ctx context.Context, serving []*Node, options int) error {
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
		s := n.State(now)
		states = append(states, fmt.Sprintf("%s cooling down until %s (%s)", s.Name, s.CoolUntil.Format(time.RFC3339), s.CoolReason))
	}
	return &engine.Failure{Kind: engine.Unavailable, Err: fmt.Errorf("every node is cooling down: %v", states)}
}

// order lists the nodes to try for a question with this many options:
// healthy nodes that take that many, in configured order.
func (r *Router) order(serving []*Node, options int) []*Node {
	now := r.now()
	var out []*Node
	for _, n := range serving {
		if n.MaxOptions >= options && n.State(now).Healthy {
			out = append(out, n)
		}
	}
	return out
}

// failed records a node's failure and cools it down by the policy.
func (r *Router) failed(n *Node, f *engine.Failure) {
	now := r.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	cool := func(d time.Duration, why string) {
		if until := now.Add(d); until.After(n.coolUntil) {
			if !now.Before(n.coolUntil) {
				r.obs.Cooldown(n.Name)
			}
			n.coolUntil, n.coolReason = until, why
		}
	}
	switch {
	case f.Kind == engine.Rejected:
		return // the request's fault, not the node's
	case f.Kind == engine.RateLimited:
		cool(max(f.RetryAfter, time.Second), f.Error())
		return
	case f.Kind == engine.Unavailable:
		cool(r.policy.Cooldown, f.Error()) // down, or a ghost claim
		return
	}
	n.failures = slices.DeleteFunc(n.failures, func(t time.Time) bool { return now.Sub(t) > r.policy.Window })
	n.failures = append(n.failures, now)
	if len(n.failures) >= r.policy.AllowedFails {
		cool(r.policy.Cooldown, fmt.Sprintf("%d failures within %s, last: %v", len(n.failures), r.policy.Window, f))
		n.failures = nil
	}
}

// Refresh re-lists the models of nodes that have never listed them, for a
// request naming a model that no node is known to serve yet.
func (r *Router) Refresh(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		if n.claimed == nil && n.Models() == nil {
			wg.Go(func() { _ = n.Discover(ctx) })
		}
	}
	wg.Wait()
}

// States reports every node's state.
func (r *Router) States() []State {
	now := r.now()
	out := make([]State, len(r.nodes))
	for i, n := range r.nodes {
		out[i] = n.State(now)
	}
	return out
}

// Model is one model id the fleet answers to.
type Model struct {
	ID      string
	AliasOf string    // the served model, for an alias
	Via     string    // the nodes that serve it, comma-separated
	Seen    time.Time // when this router first listed it
}

// Catalog lists every model the nodes serve and every alias whose target
// is served.
func (r *Router) Catalog() []Model {
	via := map[string][]string{}
	var ids []string
	for _, n := range r.nodes {
		for _, m := range n.Models() {
			if via[m] == nil {
				ids = append(ids, m)
			}
			via[m] = append(via[m], n.Name)
		}
	}
	var out []Model
	for _, id := range ids {
		out = append(out, Model{ID: id, Via: strings.Join(via[id], ","), Seen: r.seen(id)})
	}
	for alias, to := range r.aliases {
		if via[to] != nil && via[alias] == nil {
			out = append(out, Model{ID: alias, AliasOf: to, Via: strings.Join(via[to], ","), Seen: r.seen(alias)})
		}
	}
	return out
}

func (r *Router) seen(id string) time.Time {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.firstSeen == nil {
		r.firstSeen = map[string]time.Time{}
	}
	t, ok := r.firstSeen[id]
	if !ok {
		t = r.now()
		r.firstSeen[id] = t
	}
	return t
}
