package fleet

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionsapi"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/engine/openai"
	"system1/internal/redact"
	"system1/internal/systemone"
)

// Defaults for what a node's config leaves out.
const (
	DefaultLabels       = 20 // labels one call reads on an openai node: most APIs' cap
	DefaultTimeout      = 30 * time.Second
	DefaultMaxInFlight  = 64
	DefaultQueue        = 512
	DefaultQueueTimeout = 5 * time.Second
)

// Node is one engine node or one System One endpoint: whichever, its
// Backend.
type Node struct {
	Name    string
	Dialect string
	Backend Backend
	// MaxOptions caps the options of one choice on this node.
	MaxOptions int
	Timeout    time.Duration
	Priority   int
	// MaxEngineCalls is the most engine calls one request may cost on this
	// node; 0 is config.DefaultMaxEngineCalls (see overBudget).
	MaxEngineCalls int
	// Pool is set for a node that is a pool of engines behind a router of
	// its own (config.Node.Pool): nothing is pinned to one engine's
	// slots, and a failure the pool's router answers with a status counts
	// toward a cooldown rather than cooling the pool at once (see blame).
	Pool bool
	// FingerprintTolerance is how far this node's canary may move before
	// the build it serves counts as changed (config.Node's
	// fingerprint_tolerance); 0 is the router's,
	// FingerprintOptions.Tolerance.
	FingerprintTolerance float64
	// Price is what the node charges (config.Node's price); nil when it
	// is not known, and then neither is what its answers cost.
	Price *decision.Price

	claimed []string // models from the config; nil means discover them
	slots   *slots

	mu          sync.Mutex
	discovered  []string
	discoverErr error
	refreshed   time.Time // when Refresh last had the node list its models
	coolUntil   time.Time
	coolReason  string
	probeFailed bool                     // a probe failed since the last that succeeded: the node is back when one does
	probeCooled bool                     // the cooldown is a failed probe's, which a good probe ends
	coolLimited bool                     // the cooldown is the rest a 429 asked for (see noNode)
	answered    bool                     // a probe has succeeded since the process started (Unready)
	failures    []time.Time              // recent failures, within the window
	modelCool   map[string]ModelCooldown // models resting on a healthy node (see blame)
	constraint  constraint               // whether the engine holds its constraint (constraint.go)
	builds      map[string]*build        // the builds it serves, by model (fingerprint.go)
	probing     map[string]chan struct{} // the on-use probes running, by model; closed when done

	// What State counts: failed engine calls, failovers off the node and
	// cooldowns.
	errors, failovers, cooldowns atomic.Int64
}

// NewNode builds a node from its configuration. getenv reads its key.
func NewNode(c config.Node, getenv func(string) string, hc *http.Client) (*Node, error) {
	key := ""
	if c.KeyEnv != "" {
		key = getenv(c.KeyEnv)
	}
	n := &Node{
		Name:       c.Name,
		Dialect:    c.Dialect,
		MaxOptions: cmp.Or(c.MaxOptions, config.MaxOptions),
		Timeout:    c.Timeout.Or(DefaultTimeout),
		Priority:   c.Priority,
		Pool:       c.Pool,
		claimed:    slices.Clone(c.Models),
		slots:      newSlots(c.MaxInFlight, c.Queue, c.QueueTimeout.Or(DefaultQueueTimeout)),
	}
	n.MaxEngineCalls, n.FingerprintTolerance = c.MaxEngineCalls, c.FingerprintTolerance
	n.Price = c.Price.Decision()
	switch c.Dialect {
	case "llamacpp":
		// A pool's llama-servers each have their own slots, and its
		// router picks the server; the prompts of one call the server
		// gives slots itself: no slot is pinned through either.
		pin := !c.Pool && c.PromptsPerCall <= 1 && (c.PinSlots == nil || *c.PinSlots)
		spread := pin && (c.SpreadSlots == nil || *c.SpreadSlots)
		// Pinned to one slot, a state's questions run one after another
		// after the first; unpinned, they would each take a slot and
		// prefill; spread, they wait for the first's prefill, then load it.
		e := &llamacpp.Engine{BaseURL: c.URL, Key: key, HTTP: hc, PerCall: c.MaxLabels, PinSlots: pin, SpreadSlots: spread, Pool: c.Pool, PromptsPerCall: c.PromptsPerCall}
		n.Backend = EngineBackend(e, !pin || spread)
	case "ollama":
		// llama.cpp's slots underneath, no pinning: the first goes alone.
		n.Backend = EngineBackend(&ollama.Engine{BaseURL: c.URL, Key: key, HTTP: hc, NumCtx: c.NumCtx}, true)
	case "openai":
		// Behind a pool's prefix-aware router, a state's first question
		// goes alone, so that the router has placed its prefix on one
		// engine before the rest follow it there.
		e := &openai.Engine{BaseURL: c.URL, Key: key, HTTP: hc, Constrain: c.Constrain, TopLogprobs: cmp.Or(c.MaxLabels, DefaultLabels)}
		n.Backend = EngineBackend(e, c.Pool)
		if e.Caps().Subsets { // held to the labels
			n.constrained(c.Constrain)
		}
	case "systemone":
		n.Backend = UpstreamBackend(&systemone.Client{BaseURL: c.URL, Key: key, HTTP: hc})
	case "decisions":
		n.Backend = DecisionsBackend(&decisionsapi.Client{BaseURL: c.URL, Key: key, HTTP: hc})
	default:
		return nil, fmt.Errorf("node %s: dialect %q is not one of %s", c.Name, c.Dialect, strings.Join(config.Dialects, ", "))
	}
	// A key variable named but empty is a mistake, not a wish to send no
	// key: the node is never asked, and says why.
	if c.KeyEnv != "" && key == "" {
		n.Backend = unusable{fmt.Errorf("not asked: its key variable %s is not set", c.KeyEnv)}
	}
	return n, nil
}

// FromConfig builds the router cfg describes, the one place a configured
// router is built (serve, mcp, decide and bench): its nodes, and its
// aliases, debias, prior, max_questions and fingerprint settings (its
// builds file too, unless o gives a store), which replace o's; o gives the
// rest (Getenv, Observer, Policy, Fingerprint.Log). It normalizes cfg
// first. Calls share one HTTP client whose connections are kept alive per
// node, closed after 30 s idle; each is bounded by its node's timeout.
func FromConfig(cfg *config.Config, o Options) (*Router, error) {
	cfg.Normalize() // the old providers: form names nodes too
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	hc := &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     30 * time.Second,
		ForceAttemptHTTP2:   true,
	}}
	var ns []*Node
	for _, c := range cfg.Nodes {
		n, err := NewNode(c, o.Getenv, hc)
		if err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	o.Aliases, o.MaxQuestions = cfg.Aliases, cfg.MaxQuestions
	o.Debias = Debias{Permute: cfg.Debias == decision.DebiasPermute, Orders: cfg.DebiasOrders}
	o.Fingerprint.Off, o.Fingerprint.CanaryEvery, o.Fingerprint.Tolerance = cfg.Fingerprint.Off, time.Duration(cfg.Fingerprint.CanaryEvery), cfg.Fingerprint.Tolerance
	o.Fingerprint.ProbeEvery = cfg.ProbeEvery.Or(config.DefaultProbeEvery)
	o.Fingerprint.CheckEveryAnswers = cfg.Fingerprint.CheckEveryAnswers
	o.Fingerprint.NoiseTest = cfg.Fingerprint.NoiseTested()
	if p := cfg.BuildsPath(); p != "" && o.Fingerprint.Builds == nil {
		o.Fingerprint.Builds = BuildsFile{Path: p}
	}
	o.Prior = Prior{Mode: cfg.Prior, MinRequests: cfg.PriorMinRequests, Window: cfg.PriorWindow, Signatures: cfg.PriorSignatures}
	return New(ns, o), nil
}

// Models are the models the node serves: those its config claims, else
// those it last listed.
func (n *Node) Models() []string {
	if n.claimed != nil {
		return n.claimed
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.discovered
}

// Serves reports whether the node serves model. On Ollama a name without
// a tag is the one tagged latest, as Ollama itself reads it.
func (n *Node) Serves(model string) bool {
	return slices.ContainsFunc(n.Models(), func(m string) bool { return n.sameModel(m, model) })
}

// sameModel reports whether a and b name one model as the node's engine
// reads names: exactly, and on Ollama with its implicit :latest.
func (n *Node) sameModel(a, b string) bool {
	return a == b || (n.Dialect == "ollama" && ollama.Tagged(a) == ollama.Tagged(b))
}

// list asks the node for its models: a cheap call that carries no user
// data, used both to discover models and to probe health.
func (n *Node) list(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	return n.Backend.Models(ctx)
}

// listedLocked records what a node whose config names no models listed,
// or why it did not, unless the caller of the list (ctx) gave up on it,
// which says nothing about the node; the caller holds n.mu.
func (n *Node) listedLocked(ctx context.Context, models []string, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	n.discoverErr = err
	if err == nil {
		n.discovered = models
	}
}

// State is a node's health and load as the router sees it: the one view
// of a node that /health, system1_health, the page and the metrics show.
type State struct {
	Name       string    `json:"name"`
	Dialect    string    `json:"dialect" jsonschema:"llamacpp, ollama, openai, systemone or decisions."`
	Models     []string  `json:"models" jsonschema:"The models it serves: those its configuration names, else those it last listed."`
	Priority   int       `json:"priority"`
	Healthy    bool      `json:"healthy" jsonschema:"False while the node cools down after failures, or after a health probe found it down (cool_reason says which)."`
	InFlight   int       `json:"in_flight"`
	Queued     int       `json:"queued"`
	Slots      int       `json:"slots" jsonschema:"How many engine calls the node runs at once: its max_inflight, or fewer where its engine said it runs fewer (llama-server's slots, once read). A client keeping the node busy keeps this many calls in flight."`
	CoolUntil  time.Time `json:"cool_until,omitzero"`
	CoolReason string    `json:"cool_reason,omitempty"`
	Error      string    `json:"error,omitempty" jsonschema:"Why the node last failed to list its models, for a node whose models are not configured."`
	// ModelCooldowns are models resting on the node while it serves the
	// others: a 404 for one model is that model's problem.
	ModelCooldowns []ModelCooldown `json:"model_cooldowns,omitempty"`
	Constraint     ConstraintState `json:"constraint" jsonschema:"Whether the node holds its constraint of the first token to the labels, probed once at its first use (no user data is sent) and again when it comes back after being down."`
	// Errors, Failovers and Cooldowns count since the process started;
	// the metrics count the same by node (system1_engine_attempts_total,
	// system1_cooldowns_total) or by model (system1_failovers_total).
	Errors      int64        `json:"errors" jsonschema:"Engine calls to the node that failed, since the process started (calls the caller gave up on are not counted)."`
	Failovers   int64        `json:"failovers" jsonschema:"Times questions that failed on the node moved on to another node, since the process started."`
	Cooldowns   int64        `json:"cooldowns" jsonschema:"Times the node was cooled down, since the process started."`
	PromptLists *PromptLists `json:"prompt_lists,omitempty" jsonschema:"On a llamacpp node with prompts_per_call: the calls of several prompts it was sent since the process started, and the prompts they carried."`
	// Fingerprints are the builds it serves, by model, as the background
	// probes last saw them (docs/fingerprints.md).
	Fingerprints []Fingerprint `json:"fingerprints,omitempty" jsonschema:"The builds the node serves, by model, as the background probes last saw them: fingerprint, since when, and the changes seen."`
}

// Redacted is the state as a caller over the network may read it: its
// free texts (why the node cools down or failed to list its models, what
// its constraint probe found, why a model rests on it) with the
// addresses they name taken out. Local faces show the state as it is.
func (s State) Redacted() State {
	s.CoolReason, s.Error, s.Constraint.Detail = redact.Text(s.CoolReason), redact.Text(s.Error), redact.Text(s.Constraint.Detail)
	s.ModelCooldowns = slices.Clone(s.ModelCooldowns)
	s.Fingerprints = slices.Clone(s.Fingerprints)
	for i := range s.Fingerprints {
		s.Fingerprints[i].Error = redact.Text(s.Fingerprints[i].Error)
	}
	for i := range s.ModelCooldowns {
		s.ModelCooldowns[i].Reason = redact.Text(s.ModelCooldowns[i].Reason)
	}
	return s
}

// State reports the node's health at now.
func (n *Node) State(now time.Time) State {
	models := n.Models()
	inFlight, queued := n.slots.load()
	n.mu.Lock()
	defer n.mu.Unlock()
	if models == nil {
		models = []string{} // none known yet: an empty list, never null
	}
	s := State{Name: n.Name, Dialect: n.Dialect, Models: models, Priority: n.Priority,
		Healthy: !now.Before(n.coolUntil), InFlight: inFlight, Queued: queued, Slots: n.knownSlots(),
		Errors: n.errors.Load(), Failovers: n.failovers.Load(), Cooldowns: n.cooldowns.Load()}
	if !s.Healthy {
		s.CoolUntil, s.CoolReason = n.coolUntil, n.coolReason
	}
	if n.discoverErr != nil {
		s.Error = n.discoverErr.Error()
	}
	if e := n.llama(); e != nil {
		if calls, prompts, on := e.Lists(); on {
			s.PromptLists = &PromptLists{Calls: calls, Prompts: prompts}
		}
	}
	s.ModelCooldowns = n.modelCooldowns(now)
	s.Constraint = n.constraintLocked()
	s.Fingerprints = n.fingerprintsLocked()
	return s
}

// PromptLists are the calls of several prompts a node was sent, and the
// prompts they carried.
type PromptLists struct {
	Calls   int64 `json:"calls"`
	Prompts int64 `json:"prompts"`
}

// ModelCooldown is one model resting on a healthy node: the node is
// fine, this model on it is not.
type ModelCooldown struct {
	Model  string    `json:"model"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// modelResting reports whether model rests on n at now, and why.
func (n *Node) modelResting(model string, now time.Time) (ModelCooldown, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.modelCool[model]
	if ok && !now.Before(c.Until) {
		delete(n.modelCool, model)
		return ModelCooldown{}, false
	}
	return c, ok
}

// modelCooldowns lists the models resting on n at now, by name; the
// caller holds n.mu.
func (n *Node) modelCooldowns(now time.Time) []ModelCooldown {
	var out []ModelCooldown
	for _, c := range n.modelCool {
		if now.Before(c.Until) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}
