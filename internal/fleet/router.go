package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"system1/internal/decision"
)

// Observer is told what the router does, for metrics.
type Observer interface {
	Attempt(node, model, outcome string, d time.Duration)
	Failover(model string)
	Cooldown(node string)
}

type noObserver struct{}

func (noObserver) Attempt(string, string, string, time.Duration) {}

func (noObserver) Failover(string) {}

func (noObserver) Cooldown(string) {}

// Router answers questions across nodes.
type Router struct {
	nodes   []*Node
	aliases map[string]string
	// aliasNames are the aliases' names, sorted once: the catalog lists
	// them in that order on every call.
	aliasNames []string
	policy     Policy
	obs        Observer
	now        func() time.Time

	seenMu    sync.Mutex
	firstSeen map[string]time.Time

	warm warmStates

	debias       Debias
	prior        *priors
	prints       *fingerprints // nil: fingerprints are off
	maxQuestions int           // 0: decision.DefaultMaxQuestions
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
	// Fingerprint says how the background probes tell which build each
	// node serves (fingerprint.go).
	Fingerprint FingerprintOptions
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
	return &Router{nodes: nodes, aliases: o.Aliases, aliasNames: slices.Sorted(maps.Keys(o.Aliases)), policy: o.Policy, obs: o.Observer, now: time.Now,
		debias: o.Debias, prior: newPriors(o.Prior), maxQuestions: max(o.MaxQuestions, 0),
		prints: newFingerprints(o.Fingerprint)}
}

// Only is a router over the named nodes alone, in configured order, that
// shares their state (load, cooldowns, model lists), the settings, the
// priors and the fingerprints with r. It substitutes no aliases: whoever
// names the nodes names the model they serve. Names that match no node
// are left out.
func (r *Router) Only(names []string) *Router {
	nodes := slices.DeleteFunc(slices.Clone(r.nodes), func(n *Node) bool { return !slices.Contains(names, n.Name) })
	return &Router{nodes: nodes, policy: r.policy, obs: r.obs, now: r.now,
		debias: r.debias, prior: r.prior, prints: r.prints, maxQuestions: r.maxQuestions}
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
	return slices.DeleteFunc(slices.Clone(r.nodes), func(n *Node) bool { return !n.Serves(model) })
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
	lim.MaxQuestions = cmp.Or(r.maxQuestions, lim.MaxQuestions)
	lim.MaxChoiceOptions = 0
	for _, n := range nodes {
		lim.MaxChoiceOptions = max(lim.MaxChoiceOptions, n.MaxOptions)
	}
	return lim, nil
}

// Model is one model id the fleet answers to.
type Model struct {
	ID      string
	AliasOf string    // the served model, for an alias
	Via     string    // the nodes that serve it, comma-separated
	Seen    time.Time // when this router first listed it
}

// Catalog lists every model the nodes serve, in the nodes' order, then
// every alias whose target is served, by name.
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
	for _, alias := range r.aliasNames {
		if to := r.aliases[alias]; via[to] != nil && via[alias] == nil {
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
