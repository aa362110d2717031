package fleet

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

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
	case f.Kind == engine.Rejected || f.Kind == engine.Busy || f.Kind == engine.Canceled:
		return // the request's fault, a full queue or a caller gone: not the node's health
	case f.Kind == engine.RateLimited:
		cool(max(f.RetryAfter, time.Second), f.Error())
		return
	case f.Kind == engine.Unavailable:
		cool(r.policy.Cooldown, f.Error()) // down, or a ghost claim
		n.constraintUnknown(f.Error())
		return
	}
	n.failures = slices.DeleteFunc(n.failures, func(t time.Time) bool { return now.Sub(t) > r.policy.Window })
	n.failures = append(n.failures, now)
	if len(n.failures) >= r.policy.AllowedFails {
		cool(r.policy.Cooldown, fmt.Sprintf("%d failures within %s, last: %v", len(n.failures), r.policy.Window, f))
		n.failures = nil
	}
}

// Probe checks every node in the background's way: a model list, which
// carries no user data. A node that fails it is cooled down; one cooled by
// a failed probe is healthy again as soon as a probe succeeds. Nodes
// without configured models take the list as their models.
func (r *Router) Probe(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Go(func() {
			models, err := n.list(ctx)
			// A node whose models the config lists only has to be alive:
			// one without a model list (laya-serve has none) answers 404.
			if f := engine.Classify(err); f != nil && f.Status == http.StatusNotFound && n.claimed != nil {
				err = nil
			}
			n.mu.Lock()
			if n.claimed == nil {
				n.discoverErr = err
				if err == nil {
					n.discovered = models
				}
			}
			if err == nil && n.probeFailed {
				n.coolUntil, n.coolReason, n.probeFailed = time.Time{}, "", false
			}
			n.mu.Unlock()
			if f := engine.Classify(err); f != nil && ctx.Err() == nil {
				r.failed(n, &engine.Failure{Kind: engine.Unavailable, Status: f.Status, Err: fmt.Errorf("health probe: %w", f)})
				n.mu.Lock()
				n.probeFailed = true
				n.mu.Unlock()
			}
		})
	}
	wg.Wait()
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

// Ping is one node's answer to a model list.
type Ping struct {
	Node string
	// Err is why the node did not list its models; nil when it did.
	Err error
	// Models is how many it listed.
	Models int
	// Healthy is false while the node is cooling down.
	Healthy bool
}

// Ping asks every node serving model for its model list, concurrently:
// a call that carries no user data. As for the background probes, a node
// whose models the config lists is alive when it has no model list (404).
func (r *Router) Ping(ctx context.Context, model string) []Ping {
	nodes := r.Serving(model)
	out := make([]Ping, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			models, err := n.list(ctx)
			if f := failure(err); f != nil && f.Status == http.StatusNotFound && n.claimed != nil {
				err, models = nil, n.claimed
			}
			out[i] = Ping{Node: n.Name, Err: err, Models: len(models), Healthy: n.State(r.now()).Healthy}
		})
	}
	wg.Wait()
	return out
}
