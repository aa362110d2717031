// Package config reads system1's YAML configuration file, shared by every
// face: the HTTP server's listeners, keys and limits, the engine nodes, the
// gateway's provider chain and its calibration.
package config

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"system1/internal/decision"
)

// Duration is a time.Duration written as "30s", "1.5s", "250ms".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration { return cmp.Or(time.Duration(d), def) }

// Config is the whole file.
type Config struct {
	// Listen is the plain HTTP address of system1 serve.
	Listen string `yaml:"listen"`
	// TLS, when it names a certificate, adds an HTTPS listener beside the
	// plain one.
	TLS TLS `yaml:"tls"`
	// Keys are the bearer keys callers must present (keys.go); KeysEnv
	// names a variable holding more, comma-separated, each with every
	// scope. None at all turns auth off.
	Keys    []Key  `yaml:"keys"`
	KeysEnv string `yaml:"keys_env"`
	// RateLimit is a token bucket per key (per client address when auth is
	// off).
	RateLimit RateLimit `yaml:"rate_limit"`
	Timeouts  Timeouts  `yaml:"timeouts"`
	// ProbeEvery is how often every node is probed in the background (a
	// model list, no user data) and nodes without configured models
	// re-list theirs; default DefaultProbeEvery.
	ProbeEvery Duration `yaml:"probe_every"`
	// Fingerprint says how the probes tell which build each node serves
	// under each model name (docs/fingerprints.md).
	Fingerprint Fingerprint `yaml:"fingerprint"`
	// MaxBodyBytes bounds a request body; larger is a 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxQuestions bounds the questions of one request (default
	// decision.DefaultMaxQuestions, 1,000); more is a 422.
	MaxQuestions int `yaml:"max_questions"`
	// Rounding is the number of decimals /v1/systemone reports (Jev: 2);
	// -1 reports full precision.
	Rounding *int `yaml:"rounding"`
	// Calibration is "off" (report what the engine reported) or "apply"
	// (apply the matching fit on /v1/systemone), written as that scalar
	// (the old form) or as a mapping with refits and gates; left out, it
	// is the learning loop while the decision log is on (Config.Learn).
	Calibration Calibration `yaml:"calibration"`
	// Debias is "off" (the default) or "permute": ask each question over
	// cyclic shifts of its options and average the readings, on
	// /v1/systemone and decide alike; a request may say otherwise.
	Debias string `yaml:"debias"`
	// DebiasOrders is the most shifts permute asks of a question (all of
	// them when it has fewer options); 0 is the default, 4.
	DebiasOrders int `yaml:"debias_orders"`
	// Prior is "off" (the default), "batch" or "content_free": divide a
	// label prior out of every answer, after debiasing and before
	// temperature, on /v1/systemone and decide alike; a request may say
	// otherwise. batch divides out each label position's running mean
	// over the answers of the same question signature; content_free the
	// question's reading over an empty state (one extra engine call,
	// cached).
	Prior string `yaml:"prior"`
	// PriorMinRequests is how many answers of a signature batch must have
	// seen before it divides their mean out; 0 is the default, 32.
	PriorMinRequests int `yaml:"prior_min_requests"`
	// PriorWindow is how many recent answers the batch estimate weighs
	// equally before older ones decay; 0 is the default, 256.
	PriorWindow int `yaml:"prior_window"`
	// PriorSignatures bounds the batch estimates and the content-free
	// readings kept in memory (each), the least recently used evicted;
	// 0 is the default, 1024.
	PriorSignatures int `yaml:"prior_signatures"`
	// Aliases map a model id callers send to a model the nodes serve.
	// Only these are ever substituted.
	Aliases map[string]string `yaml:"aliases"`
	Nodes   []Node            `yaml:"nodes"`
	Gateway Gateway           `yaml:"gateway"`
	// Providers are the gateway's chain in the old form, which Normalize
	// translates into Gateway.Chain and Nodes.
	Providers []Provider `yaml:"providers,omitempty"`
	// DecisionLog is where answered questions are recorded.
	DecisionLog DecisionLog `yaml:"decision_log"`
	// Admin is an opt-in listener for operators, apart from the public
	// one: Go's profiler (net/http/pprof). Off unless it names an address.
	Admin Admin `yaml:"admin"`
	// Tracing sends OpenTelemetry traces to a collector; off unless an
	// endpoint is named here or in the standard variables.
	Tracing Tracing `yaml:"tracing"`
	// Cache answers exact repeats of a request from memory; off unless
	// it names a number of entries.
	Cache Cache `yaml:"cache"`
	// Shadow are the shadow rollouts: candidates asked a share of the
	// live requests beside the served model.
	Shadow []Shadow `yaml:"shadow"`
	// Cascades are models made of others, asked in turn per question
	// (docs/cascades.md).
	Cascades []Cascade `yaml:"cascades"`
	// Drift configures the label-free drift report and its alarm.
	Drift Drift `yaml:"drift"`

	// Path is the file this was read from, if any.
	Path string `yaml:"-"`
	// OldForm is set by Normalize when it translated Providers.
	OldForm bool `yaml:"-"`
	// translation holds what Normalize could not translate, for Check.
	translation  []error
	oldProviders []Provider
}

// Fingerprint configures the fingerprints of the served builds: at every
// background probe each (node, model)'s identity is read (calls that run
// no model), and its canary, a few fixed questions, is asked when it is
// first probed, every CanaryEvery, and at once when its identity changed
// or the node came back from being down.
type Fingerprint struct {
	// Off turns fingerprints off: no identity reads, no canary; answers
	// name no fingerprint and every fit applies by model as before.
	Off bool `yaml:"off"`
	// CanaryEvery is how often each (node, model)'s canary is asked
	// again; 0 is the default, 10m.
	CanaryEvery Duration `yaml:"canary_every"`
	// Tolerance is how far, in probability, the canary may move before
	// the build counts as changed, on a node that sets none of its own
	// (Node.FingerprintTolerance); 0 is the default, 0.01, measured on
	// CPU engines (a GPU or hosted node wants its own, measured).
	Tolerance float64 `yaml:"tolerance"`
	// Builds is the file the builds a process names are kept in, with
	// their reference readings, so that every process reading it names a
	// build alike; "" is builds.json beside gateway.fits when that is
	// set, else none (each process names builds by its own readings).
	// Relative to the configuration file.
	Builds string `yaml:"builds"`
	// CheckEveryAnswers reads a (node, model)'s identity and canary again
	// once it has served this many answers since its last canary, so that
	// the answers a swap leaves uncertain (kept out of both builds'
	// refits) are about this many at most; 0, the default, never: only
	// CanaryEvery does.
	CheckEveryAnswers int `yaml:"check_every_answers"`
	// NoiseTest holds canaries to each node's measured repeat noise as
	// well as to the tolerance, so that a change under the tolerance (the
	// same weights re-quantized) is seen; nil is the default, on, as
	// measured on real engines under load (docs/fingerprints.md).
	NoiseTest *bool `yaml:"noise_test"`
}

// NoiseTested says whether canaries are held to each node's measured
// repeat noise (Fingerprint.NoiseTest, on unless set false).
func (f Fingerprint) NoiseTested() bool { return f.NoiseTest == nil || *f.NoiseTest }

// BuildsPath is the builds file of cfg (Fingerprint.Builds), resolved;
// "" when there is none.
func (c *Config) BuildsPath() string {
	switch {
	case c.Fingerprint.Builds != "":
		return c.Resolve(c.Fingerprint.Builds)
	case c.Gateway.Fits != "":
		return filepath.Join(filepath.Dir(c.Resolve(c.Gateway.Fits)), "builds.json")
	}
	return ""
}

// The addresses serve listens on when listen and tls.listen are left out.
const (
	DefaultListen    = "127.0.0.1:3000"
	DefaultTLSListen = "127.0.0.1:3443"
)

// Admin configures the admin listener.
type Admin struct {
	// Listen is its address, such as 127.0.0.1:6060; empty: none. It
	// serves /debug/pprof/ and nothing else, and must differ from the
	// public listeners: anyone who reaches it can read the process's
	// memory profile, so keep it on loopback or a private network.
	Listen string `yaml:"listen"`
}

// TLS configures the optional HTTPS listener.
type TLS struct {
	Listen string `yaml:"listen"`
	Cert   string `yaml:"cert"`
	Key    string `yaml:"key"`
}

// RateLimit is a token bucket: PerSecond requests on average, Burst at once.
type RateLimit struct {
	PerSecond float64 `yaml:"per_second"`
	Burst     int     `yaml:"burst"`
	// WrongKeys bounds the wrong keys one client address may send.
	WrongKeys WrongKeys `yaml:"wrong_keys"`
}

// WrongKeys is an allowance of wrong keys per client address: Burst at
// once, then PerMinute; zero is the server's default (10 and 10).
type WrongKeys struct {
	PerMinute float64 `yaml:"per_minute"`
	Burst     int     `yaml:"burst"`
}

// validRate reports whether a token bucket's rate is a finite number >= 0
// (NaN is not) and its burst >= 0.
func validRate(rate float64, burst int) bool {
	return rate >= 0 && !math.IsInf(rate, 0) && burst >= 0
}

// Timeouts of the HTTP server.
type Timeouts struct {
	ReadHeader Duration `yaml:"read_header"` // slow-loris bound
	Read       Duration `yaml:"read"`
	Write      Duration `yaml:"write"`
	Idle       Duration `yaml:"idle"`
	Request    Duration `yaml:"request"` // one request, all engine calls included
	// Drain bounds a graceful shutdown (default 30s): on SIGTERM or
	// SIGINT the listeners close and requests in flight get this long to
	// finish; any still running are then cancelled, their callers
	// answered with an error, and serve exits 1 instead of 0.
	Drain Duration `yaml:"drain"`
	// DrainDelay is how long serve keeps its listeners open and serving
	// after the signal, with GET /readyz answering 503, before the drain
	// closes them (default 0): time for a load balancer that polls
	// readiness to stop sending, where nothing else (Kubernetes' preStop
	// hook) gives it. It adds to the time a shutdown takes.
	DrainDelay Duration `yaml:"drain_delay"`
}

// Node is one engine (or System One endpoint) that serves models.
type Node struct {
	Name    string   `yaml:"name"`
	URL     string   `yaml:"url"`
	Dialect string   `yaml:"dialect"` // llamacpp | ollama | openai | systemone | decisions
	Models  []string `yaml:"models"`  // optional: else discovered from the node
	KeyEnv  string   `yaml:"key_env"` // optional: bearer key read from this variable
	Timeout Duration `yaml:"timeout"` // per engine call
	// MaxLabels is how many labels one engine call reads: top_logprobs
	// for openai (default 20, the common cap; raise it for vLLM started
	// with a larger --max-logprobs); 0 for llamacpp reads any number.
	// Ollama reads 20.
	MaxLabels int `yaml:"max_labels"`
	// MaxOptions caps the options of one choice on this node (default
	// 255, as hosted Jev). Options beyond what one call reads go in rounds.
	MaxOptions int `yaml:"max_options"`
	// PinSlots, on a llamacpp node (default true), sends every question
	// over one state to the same server slot, so the state is prefilled
	// once: llama-server keeps its prompt cache per slot. Questions over one
	// state then run one after another on that slot, each adding only its
	// own tokens; different states still spread over the slots.
	PinSlots *bool `yaml:"pin_slots"`
	// SpreadSlots, on a pinned llamacpp node (default true), sends a
	// request's questions over one state to the slots next to the
	// state's once its first question has prefilled it, each loading the
	// state from llama-server's host-memory prompt cache (--cache-ram and
	// --cache-idle-slots, both on by default), so their own tokens are
	// evaluated in one batch; false runs them one after another on the
	// state's slot.
	SpreadSlots *bool `yaml:"spread_slots"`
	// PromptsPerCall, on a llamacpp node, sends questions that wait for
	// the node at the same time together, up to this many in one call
	// (llama-server's /completion takes a list of prompts), so that one
	// exchange carries several; 0 or 1 sends each alone. The server then
	// gives each prompt a slot, so it turns pin_slots off.
	PromptsPerCall int `yaml:"prompts_per_call"`
	// Constrain is how an openai node holds the first token to the labels:
	// structured_outputs (vLLM >= 0.12), guided_choice (older vLLM,
	// SGLang), or none (hosted APIs; the default).
	Constrain string `yaml:"constrain"`
	// MaxInFlight bounds concurrent calls to the node (default 64); Queue
	// bounds how many more wait (default 512), each at most QueueTimeout
	// (default 5s). Past that the node is busy and the next one is tried.
	MaxInFlight  int      `yaml:"max_inflight"`
	Queue        int      `yaml:"queue"`
	QueueTimeout Duration `yaml:"queue_timeout"`
	// Priority orders nodes: lower first (default 0). Among nodes of one
	// priority, questions over the same state go to the same node, else to
	// the one with fewest calls in flight; a higher priority is a fallback,
	// such as hosted Jev behind local engines.
	Priority int `yaml:"priority"`
	// NumCtx, on an ollama node, is the context in tokens the model runs
	// with (Ollama's options.num_ctx; Ollama's own default is 4096,
	// clamped to the model's). A prompt longer than the context is
	// refused, never cut. Other engines fix it when they start
	// (llama-server -c, vLLM --max-model-len).
	NumCtx int `yaml:"num_ctx"`
	// MaxEngineCalls bounds the engine calls one request may cost on this
	// node (default DefaultMaxEngineCalls): a request costing more is
	// refused before any call is made (see CallCost in the fleet).
	MaxEngineCalls int `yaml:"max_engine_calls"`
	// Pool marks a node whose URL is a pool of engines behind a router of
	// its own (llm-d's or KServe's InferencePool gateway, Dynamo's
	// frontend, the vLLM router, SGLang's gateway, a load balancer): see
	// pool.go.
	Pool bool `yaml:"pool"`
	// FingerprintTolerance is how far, in probability, this node's canary
	// may move before the build it serves counts as changed; 0 is
	// Fingerprint.Tolerance. A GPU engine or a hosted API, whose repeat
	// reads move more than a CPU engine's, wants its own, above its
	// measured spread (docs/fingerprints.md).
	FingerprintTolerance float64 `yaml:"fingerprint_tolerance"`
	// Price is what the node charges (see Price); nil leaves what its
	// answers cost unknown.
	Price *Price `yaml:"price"`
}

// Gateway holds the System 1 gateway's settings.
type Gateway struct {
	Threshold *float64 `yaml:"threshold"` // default min confidence
	Timeout   Duration `yaml:"timeout"`   // per attempt
	Deadline  Duration `yaml:"deadline"`  // whole call
	Fits      string   `yaml:"fits"`      // calibration fits file
	// MinLabelMass, when set, abstains on an answer whose engine put less
	// than this probability on the option labels at all (known only on
	// engines that report log-probabilities before their constraint).
	MinLabelMass *float64 `yaml:"min_label_mass"`
	// Chain is asked in order: each link a model the fleet serves.
	Chain []Link `yaml:"chain,omitempty"`
}

// Link is one link of the gateway's chain: a model the nodes serve, under
// a name that attempts, fits and health report.
type Link struct {
	Name  string `yaml:"name"`
	Model string `yaml:"model"`
	// Nodes, when given, are the only nodes the link asks; else every node
	// that serves the model.
	Nodes      []string `yaml:"nodes,omitempty"`
	MaxOptions int      `yaml:"max_options,omitempty"` // at most the nodes' own cap
	Timeout    Duration `yaml:"timeout,omitempty"`     // overrides gateway.timeout
}

// Provider is one link of the gateway's chain in the old form: kind engine
// is a model the nodes serve, kind systemone an endpoint of its own.
type Provider struct {
	Name       string   `yaml:"name"`
	Kind       string   `yaml:"kind"`  // engine | systemone
	Model      string   `yaml:"model"` // engine: served by the nodes; systemone: the endpoint's model
	URL        string   `yaml:"url"`
	KeyEnv     string   `yaml:"key_env"`
	MaxOptions int      `yaml:"max_options"`
	Timeout    Duration `yaml:"timeout"` // overrides gateway.timeout
}

// MaxOptions is the most options a choice may carry anywhere, as hosted Jev.
const MaxOptions = 255

// DefaultProbeEvery is probe_every when the configuration does not say.
const DefaultProbeEvery = 15 * time.Second

// MaxPriorCount bounds prior_min_requests, prior_window and
// prior_signatures: far more than any of them needs, and small enough
// that no setting can make the estimates a memory hazard.
const MaxPriorCount = 1 << 20

// Dialects a node may speak.
var Dialects = []string{"llamacpp", "ollama", "openai", "systemone", "decisions"}

// ProviderKinds the gateway knows.
var ProviderKinds = []string{"engine", "systemone"}

// Normalize translates the old providers: form into the chain and the
// nodes: an engine provider becomes a link over its model; a systemone
// provider becomes a systemone node of its name (or the node of that name,
// when it is the same endpoint) and a link over that node alone. It sets
// OldForm when it translated anything, and is a no-op when called again.
// What it cannot translate, Check reports.
func (c *Config) Normalize() {
	if len(c.Providers) == 0 {
		return
	}
	c.OldForm = true
	if len(c.Gateway.Chain) > 0 {
		c.translation = append(c.translation, errors.New("providers: the old form and gateway.chain are both given; keep gateway.chain"))
		c.Providers = nil
		return
	}
	for _, p := range c.Providers {
		l := Link{Name: p.Name, Model: p.Model, MaxOptions: p.MaxOptions, Timeout: p.Timeout}
		if p.Kind == "systemone" {
			l.Nodes = []string{p.Name}
			if i := slices.IndexFunc(c.Nodes, func(n Node) bool { return n.Name == p.Name }); i >= 0 {
				n := &c.Nodes[i]
				switch {
				case n.Dialect != "systemone" || n.URL != p.URL:
					c.translation = append(c.translation, fmt.Errorf("providers (%s): a systemone provider becomes node %s, but a node of that name with another endpoint exists; rename one", p.Name, p.Name))
				case n.Models != nil && p.Model != "" && !slices.Contains(n.Models, p.Model):
					// The same endpoint: the provider says it serves its model.
					n.Models = append(slices.Clone(n.Models), p.Model)
				}
			} else {
				var models []string
				if p.Model != "" {
					models = []string{p.Model}
				}
				c.Nodes = append(c.Nodes, Node{Name: p.Name, URL: p.URL, Dialect: "systemone", KeyEnv: p.KeyEnv, Models: models, MaxOptions: p.MaxOptions})
			}
		}
		c.Gateway.Chain = append(c.Gateway.Chain, l)
	}
	c.oldProviders = c.Providers
	c.Providers = nil
}

// Parse reads a configuration from YAML. Unknown keys are errors, so a
// typo does not silently fall back to a default; every error names the
// key path and line.
func Parse(data []byte) (*Config, error) { return ParseContext(context.Background(), data) }

// Load reads and parses the file at path, remembering the path so that
// relative file names in it (fits, certificates) resolve beside it.
func Load(path string) (*Config, error) { return LoadContext(context.Background(), path) }

// Decimals is the number of decimals /v1/systemone reports: Rounding,
// else Jev's 2.
func (c *Config) Decimals() int {
	if c.Rounding == nil {
		return 2
	}
	return *c.Rounding
}

// Resolve makes a file name from the configuration relative to the
// configuration file's folder.
func (c *Config) Resolve(name string) string {
	if name == "" || filepath.IsAbs(name) || c.Path == "" {
		return name
	}
	return filepath.Join(filepath.Dir(c.Path), name)
}

// BaseURLProblem says what keeps raw from being the base URL of an
// endpoint, to which a route such as /v1/systemone is added: it must be
// an http(s) URL with a host, and a query or fragment would swallow the
// route. It is "" for a good one.
func BaseURLProblem(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "is not an http(s) URL"
	case u.RawQuery != "" || u.ForceQuery:
		return "has a query; give the endpoint's base URL"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "has a fragment; give the endpoint's base URL"
	}
	return ""
}

// names are the names given so far in one list of the configuration.
type names map[string]bool

// check reports a name that is missing or given before in the list.
func (seen names) check(bad func(string, ...any), at, name string) {
	switch {
	case name == "":
		bad("%s: name is required", at)
	case seen[name]:
		bad("%s: name %q is used twice", at, name)
	}
	seen[name] = true
}

// Check returns every problem with the configuration's content.
func (c *Config) Check() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	nodeNames := names{}
	for i, n := range c.Nodes {
		at := fmt.Sprintf("nodes[%d]", i)
		nodeNames.check(bad, at, n.Name)
		if problem := BaseURLProblem(n.URL); problem != "" {
			bad("%s (%s): url %q %s", at, n.Name, n.URL, problem)
		}
		if !slices.Contains(Dialects, n.Dialect) {
			bad("%s (%s): dialect %q is not one of %s", at, n.Name, n.Dialect, strings.Join(Dialects, ", "))
		}
		if n.Constrain != "" && n.Constrain != "none" && n.Constrain != "structured_outputs" && n.Constrain != "guided_choice" {
			bad("%s (%s): constrain %q is not structured_outputs, guided_choice or none", at, n.Name, n.Constrain)
		}
		if n.MaxLabels < 0 || n.MaxOptions < 0 || n.MaxInFlight < 0 || n.Queue < 0 {
			bad("%s (%s): max_labels, max_options, max_inflight and queue must not be negative", at, n.Name)
		}
		if n.MaxOptions == 1 {
			bad("%s (%s): max_options 1: a choice needs at least 2 options (0 takes the default, %d)", at, n.Name, MaxOptions)
		}
		if n.MaxLabels == 1 { // every question has two options, and a choice's rounds read two a call
			bad("%s (%s): max_labels 1: a call must read at least 2 labels, or the node answers nothing (0 takes the dialect's default)", at, n.Name)
		}
		if n.MaxOptions > MaxOptions {
			bad("%s (%s): max_options %d is over %d, the most a choice may carry", at, n.Name, n.MaxOptions, MaxOptions)
		}
		if t := n.FingerprintTolerance; !(t >= 0 && t < 1) { // NaN too
			bad("%s.fingerprint_tolerance (%s): %v is not 0 (fingerprint.tolerance) or a probability in (0, 1)", at, n.Name, t)
		}
		errs = append(errs, n.checkEngineLimits(at)...)
		errs = append(errs, n.checkPool(at)...)
		errs = append(errs, n.checkPrice(at)...)
	}
	if r := c.RateLimit; !validRate(r.PerSecond, r.Burst) {
		bad("rate_limit: per_second must be a finite number >= 0 and burst >= 0")
	}
	if w := c.RateLimit.WrongKeys; !validRate(w.PerMinute, w.Burst) {
		bad("rate_limit.wrong_keys: per_minute must be a finite number >= 0 and burst >= 0")
	}
	errs = append(errs, checkKeys(c.Keys)...)
	for i, k := range c.Keys {
		if k.Budget == nil {
			continue
		}
		// A budget's spend is read from the log's records at start and
		// shared through them: without them a restart would forget it.
		if c.DecisionLog.Off {
			errs = append(errs, fmt.Errorf("%s: budget: the decision log is off (decision_log.off), and a budget's spend is kept there", k.at(i)))
		}
		keep := cmp.Or(time.Duration(c.DecisionLog.Retention), 30*24*time.Hour) // decisionlog.DefaultRetention
		if need := budgetPeriodMax[k.Budget.Per]; keep < need {
			errs = append(errs, fmt.Errorf("%s: budget per %s: decision_log.retention keeps %s of records, less than a %s (%s), so a period's spend would be pruned from the log: set retention to at least %dd",
				k.at(i), k.Budget.Per, keep, k.Budget.Per, need, int(need.Hours()/24)))
		}
	}
	// The public listeners' addresses as serve binds them: a listen left
	// out is its default, so an admin.listen equal to that default would
	// fail only once serve had bound it.
	tlsListen := c.TLS.Listen
	if c.TLS.Cert != "" {
		tlsListen = cmp.Or(tlsListen, DefaultTLSListen)
	}
	if a := c.Admin.Listen; a != "" && (a == cmp.Or(c.Listen, DefaultListen) || a == tlsListen) {
		bad("admin.listen: %s is a public listener's address; the admin listener needs its own", a)
	}
	if c.MaxQuestions < 0 {
		bad("max_questions: %d is negative", c.MaxQuestions)
	}
	if c.MaxBodyBytes < 0 {
		bad("max_body_bytes: %d is negative", c.MaxBodyBytes)
	}
	errs = append(errs, c.Calibration.check()...)
	if !decision.ValidDebias(c.Debias) {
		bad("debias: %q is not off or permute", c.Debias)
	}
	if t := c.Fingerprint.Tolerance; !(t >= 0 && t < 1) {
		bad("fingerprint: tolerance: %v is not 0 (the default) or a probability in (0, 1)", t)
	}
	if c.Fingerprint.CheckEveryAnswers < 0 {
		bad("fingerprint: check_every_answers: %d is not 0 (never) or a count of answers", c.Fingerprint.CheckEveryAnswers)
	}
	if c.DebiasOrders < 0 || c.DebiasOrders > MaxOptions {
		bad("debias_orders: %d is not 0 (the default) or 1..%d", c.DebiasOrders, MaxOptions)
	}
	if !decision.ValidPrior(c.Prior) {
		bad("prior: %q is not off, batch or content_free", c.Prior)
	}
	for _, p := range []struct {
		key string
		n   int
	}{{"prior_min_requests", c.PriorMinRequests}, {"prior_window", c.PriorWindow}, {"prior_signatures", c.PriorSignatures}} {
		if p.n < 0 || p.n > MaxPriorCount {
			bad("%s: %d is not 0 (the default) or 1..%d", p.key, p.n, MaxPriorCount)
		}
	}
	if c.Rounding != nil && (*c.Rounding < -1 || *c.Rounding > 12) {
		bad("rounding: %d is not -1 (full precision) or 0..12 decimals", *c.Rounding)
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		bad("tls: cert and key go together")
	} else if c.TLS.Listen != "" && c.TLS.Cert == "" {
		bad("tls.listen: set without cert and key, so no HTTPS listener would start; give both, or leave tls out")
	}
	if m := c.Gateway.MinLabelMass; m != nil && !(*m >= 0 && *m <= 1) {
		bad("gateway.min_label_mass: %v is not in [0,1]", *m)
	}
	if t := c.Gateway.Threshold; t != nil && !(*t >= 0 && *t <= 1) { // NaN too
		bad("gateway.threshold: %v is not in [0,1]", *t)
	}
	errs = append(errs, c.translation...)
	errs = append(errs, c.DecisionLog.Check()...)
	errs = append(errs, c.Tracing.Check()...)
	errs = append(errs, c.Cache.check()...)
	errs = append(errs, checkShadow(c.Shadow, c.Cascades)...)
	errs = append(errs, c.checkCascades()...)
	errs = append(errs, c.Drift.check()...)
	pnames := names{}
	providers := c.Providers
	if providers == nil {
		providers = c.oldProviders
	}
	for i, p := range providers {
		at := fmt.Sprintf("providers[%d]", i)
		pnames.check(bad, at, p.Name)
		switch p.Kind {
		case "engine":
			if p.Model == "" {
				bad("%s (%s): an engine provider needs a model served by the nodes", at, p.Name)
			}
			// An engine provider is a model the nodes serve: its engine
			// is a node under nodes:, and a url here would reach nothing.
			if p.URL != "" {
				bad("%s.url (%s): an engine provider takes no url; it is a model the nodes serve, so give the engine as a node under nodes: (or use kind: systemone for a System One endpoint)", at, p.Name)
			}
			if p.KeyEnv != "" {
				bad("%s.key_env (%s): an engine provider takes no key_env; give it on the node that serves the model", at, p.Name)
			}
		case "systemone":
			if problem := BaseURLProblem(p.URL); problem != "" {
				bad("%s (%s): url %q %s", at, p.Name, p.URL, problem)
			}
			if p.Model == "" {
				bad("%s (%s): a systemone provider needs the endpoint's model", at, p.Name)
			}
		default:
			bad("%s (%s): kind %q is not one of %s", at, p.Name, p.Kind, strings.Join(ProviderKinds, ", "))
		}
		if p.MaxOptions < 0 {
			bad("%s (%s): max_options must not be negative", at, p.Name)
		}
		if p.MaxOptions == 1 {
			bad("%s (%s): max_options 1: a choice needs at least 2 options (0 takes the default)", at, p.Name)
		}
	}
	if c.oldProviders == nil {
		lnames := names{}
		for i, l := range c.Gateway.Chain {
			at := fmt.Sprintf("gateway.chain[%d]", i)
			lnames.check(bad, at, l.Name)
			if l.Model == "" {
				bad("%s (%s): a link needs a model served by the nodes", at, l.Name)
			}
			for _, n := range l.Nodes {
				if !nodeNames[n] {
					bad("%s (%s): node %q is not configured", at, l.Name, n)
				}
			}
			if l.MaxOptions < 0 || l.MaxOptions > MaxOptions {
				bad("%s (%s): max_options must be 0 to %d", at, l.Name, MaxOptions)
			}
			if l.MaxOptions == 1 { // as a node's and a provider's: every choice would be skipped
				bad("%s (%s): max_options 1: a choice needs at least 2 options (0 takes the nodes' cap)", at, l.Name)
			}
		}
	}
	return errs
}
