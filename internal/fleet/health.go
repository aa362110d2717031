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

// failedLocked records a node's failure at now, one that speaks of the
// node (see speaks), and cools it down by the policy; the caller holds
// n.mu. It reports whether the failure began or lengthened n's cooldown.
func (r *Router) failedLocked(n *Node, f *engine.Failure, now time.Time) bool {
	switch f.Kind {
	case engine.RateLimited:
		cooled := r.coolLocked(n, now, max(f.RetryAfter, time.Second), f.Error())
		n.coolLimited = n.coolLimited || cooled
		return cooled
	case engine.Unavailable:
		cooled := r.coolLocked(n, now, r.policy.Cooldown, f.Error()) // down, or a ghost claim
		n.constraintUnknown(f.Error())
		if e := n.slotted(); e != nil {
			e.Down() // it may come back with other slots
		}
		return cooled
	default:
		return r.countLocked(n, f, now)
	}
}

// countLocked adds a failure at now to n's window and cools n when the
// window holds AllowedFails of them; the caller holds n.mu. It reports
// whether it began or lengthened n's cooldown.
func (r *Router) countLocked(n *Node, f *engine.Failure, now time.Time) bool {
	n.failures = slices.DeleteFunc(n.failures, func(t time.Time) bool { return now.Sub(t) > r.policy.Window })
	n.failures = append(n.failures, now)
	if len(n.failures) >= r.policy.AllowedFails {
		cooled := r.coolLocked(n, now, r.policy.Cooldown, fmt.Sprintf("%d failures within %s, last: %v", len(n.failures), r.policy.Window, f))
		n.failures = nil
		return cooled
	}
	return false
}

// coolLocked cools n down for d from now, for why, unless it cools down
// longer already, and reports whether it did; the caller holds n.mu. The
// cooldown is then no failed probe's for a good probe to end (probe
// marks its own, probeCooled).
func (r *Router) coolLocked(n *Node, now time.Time, d time.Duration, why string) bool {
	until := now.Add(d)
	if !until.After(n.coolUntil) {
		return false
	}
	if !now.Before(n.coolUntil) {
		r.obs.Cooldown(n.Name)
		n.cooldowns.Add(1)
	}
	n.coolUntil, n.coolReason, n.probeCooled, n.coolLimited = until, why, false, false
	return true
}

// Probe checks every node in the background's way: a model list, which
// carries no user data (see probe); then, on a node that answered, the
// fingerprints of the builds it serves (fingerprintNode), whose canary is
// asked again at once on a node back from being down. It returns when
// every node's probe is done.
func (r *Router) Probe(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Go(func() {
			n.mu.Lock()
			wasDown := n.probeFailed
			n.mu.Unlock()
			if _, err := r.probe(ctx, n); err == nil {
				r.fingerprintNode(ctx, n, wasDown)
			}
		})
	}
	wg.Wait()
}

// probe lists n's models and records what it found in the node's state,
// the one every view of the node reads: a node that fails is cooled down
// (a pool on its router's error statuses only in turn, as blame does),
// and one cooled by a failed probe is healthy again as soon as a probe
// succeeds. A node without configured models takes the list as its
// models. A node whose models the config lists only has to be alive: one
// without a model list (laya-serve has none) answers 404, and the models
// returned are the configured ones. A probe the caller gave up on says
// nothing about the node.
func (r *Router) probe(ctx context.Context, n *Node) ([]string, error) {
	models, err := n.list(ctx)
	if f := failure(err); f != nil && f.Status == http.StatusNotFound && n.claimed != nil {
		models, err = n.claimed, nil
	}
	n.mu.Lock()
	if n.claimed == nil {
		n.listedLocked(ctx, models, err)
	}
	if err == nil {
		n.answered = true
		if n.probeCooled {
			n.coolUntil, n.coolReason = time.Time{}, ""
		}
		n.probeFailed, n.probeCooled = false, false
	}
	n.mu.Unlock()
	if f := failure(err); f != nil && ctx.Err() == nil {
		// A good probe ends only a cooldown a probe began or lengthened
		// as down: a 429's rest, the probe's own too, is kept to.
		limited := f.Kind == engine.RateLimited
		kind := engine.Unavailable
		if limited {
			kind = engine.RateLimited
		}
		pf := &engine.Failure{Kind: kind, Status: f.Status, RetryAfter: f.RetryAfter, Err: probeCause(f)}
		n.mu.Lock()
		var cooled bool
		if n.Pool && kind == engine.Unavailable && f.Status != 0 {
			// An error status a pool's router answers with is one
			// member's failure, counted as a request's is (see blame).
			cooled = r.countLocked(n, pf, r.now())
		} else {
			cooled = r.failedLocked(n, pf, r.now())
		}
		if cooled && !limited {
			n.probeCooled = true
		}
		n.probeFailed = true
		n.mu.Unlock()
	}
	return models, err
}

// probeCause is why a probe found a node down, for the cooldown it
// starts: the failure's own words once, its status being the
// cooldown's, and its kind where it is not the cooldown's (unavailable,
// or a 429's rate limit).
func probeCause(f *engine.Failure) error {
	if f.Kind == engine.Unavailable || f.Kind == engine.RateLimited {
		return fmt.Errorf("health probe: %w", f.Err)
	}
	return fmt.Errorf("health probe: %s: %w", f.Kind, f.Err)
}

// refreshEvery is how often a node that listed its models lists them
// again for requests naming a model no node is known to serve: one
// pulled since is found where no background probe runs (mcp, the
// command line), and callers naming unknown models cost a node at most
// one list in that time.
const refreshEvery = 10 * time.Second

// Refresh has the nodes that discover their models list them again, for
// a request naming a model that no node is known to serve yet: a node
// that never listed them at once, one that did once refreshEvery has
// passed since Refresh last had it list them.
func (r *Router) Refresh(ctx context.Context) {
	now := r.now()
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		if n.claimed != nil {
			continue
		}
		n.mu.Lock()
		due := n.discovered == nil || now.Sub(n.refreshed) >= refreshEvery
		if due {
			n.refreshed = now
		}
		n.mu.Unlock()
		if due {
			wg.Go(func() {
				models, err := n.list(ctx)
				n.mu.Lock()
				n.listedLocked(ctx, models, err)
				n.mu.Unlock()
			})
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
	// Healthy is the node's state after the ping: false while it cools
	// down, as it does at once when the ping found it down.
	Healthy bool
	// CoolReason is why it cools down, when it does.
	CoolReason string
}

// Ping probes every node serving model concurrently, as the background
// probes do (probe): the result is the nodes' state too, so that what a
// health check reports of a node is what every other view shows.
func (r *Router) Ping(ctx context.Context, model string) []Ping {
	nodes := r.Serving(model)
	out := make([]Ping, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			models, err := r.probe(ctx, n)
			s := n.State(r.now())
			out[i] = Ping{Node: n.Name, Err: err, Models: len(models), Healthy: s.Healthy, CoolReason: s.CoolReason}
		})
	}
	wg.Wait()
	return out
}

// Fleet statuses: the nodes' states in one word.
const (
	FleetOK       = "ok"       // every node is healthy
	FleetDegraded = "degraded" // some nodes cool down; the others serve
	FleetDown     = "down"     // no node is healthy, or there is none
)

// FleetStatus sums up the nodes' states: FleetOK, FleetDegraded or
// FleetDown.
func FleetStatus(states []State) string {
	healthy := 0
	for _, s := range states {
		if s.Healthy {
			healthy++
		}
	}
	switch {
	case healthy == 0:
		return FleetDown
	case healthy < len(states):
		return FleetDegraded
	}
	return FleetOK
}
