// Package gateway is the System 1 gateway: one decision among options (or
// yes or no), asked of a chain of providers in order, with a confidence
// that is the decision's own probability after calibration, an honest
// abstention when that is under the threshold, and never a made-up
// number. Its request and response types are the published contract
// (schema version "1"); the MCP server, the HTTP route POST /v1/decide and
// the decide command are faces over it.
package gateway

//go:generate go run ./schemagen -out ../../schema

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fleet"
	"system1/internal/pause"
)

// Defaults for the gateway's settings.
const (
	DefaultThreshold = 0.6
	DefaultTimeout   = 2 * time.Second
	DefaultDeadline  = 6 * time.Second
)

// decimals is how many decimals probabilities and confidences are
// reported to.
const decimals = 3

// Options build a Gateway.
type Options struct {
	// Config is the configuration file read; nil when it could not be.
	Config *config.Config
	// ConfigPath is the file that was (or should have been) read.
	ConfigPath string
	// ConfigErrors are problems met reading the file. New adds those of
	// its content. Any problem makes decide answer config_error.
	ConfigErrors []error
	// Router is the fleet engine providers use; nil builds one from the
	// configuration's nodes.
	Router *fleet.Router
	// Getenv reads providers' keys; nil is os.Getenv.
	Getenv func(string) string
	// HTTP calls systemone providers; nil uses a default client.
	HTTP *http.Client
	// Log receives one line per call, each with its request id.
	Log *slog.Logger
	// StatePath is the pause state file, read on every call.
	StatePath string
	// Version is the gateway's version, as reported by health.
	Version string
}

// Gateway decides.
type Gateway struct {
	opt       Options
	errs      []string
	providers []Provider
	threshold float64
	timeout   time.Duration
	deadline  time.Duration
	fits      *calibration.Fits
	fitsPath  string
	log       *slog.Logger
}

// New builds a gateway from its configuration. It never fails: what is
// wrong is kept and reported by health and capabilities, and decide
// answers config_error until it is fixed.
func New(o Options) *Gateway {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{opt: o, threshold: DefaultThreshold, timeout: DefaultTimeout, deadline: DefaultDeadline, log: o.Log}
	for _, err := range o.ConfigErrors {
		g.errs = append(g.errs, err.Error())
	}
	cfg := o.Config
	if cfg == nil {
		if len(g.errs) == 0 {
			g.errs = append(g.errs, "no configuration was read")
		}
		return g
	}
	for _, err := range cfg.Check() {
		g.errs = append(g.errs, err.Error())
	}
	gw := cfg.Gateway
	if t := gw.Threshold; t != nil && *t >= 0 && *t <= 1 { // else Check reported it
		g.threshold = *t
	}
	g.timeout = gw.Timeout.Or(DefaultTimeout)
	g.deadline = gw.Deadline.Or(DefaultDeadline)
	if gw.Fits != "" {
		g.fitsPath = cfg.Resolve(gw.Fits)
		data, err := os.ReadFile(g.fitsPath)
		if err == nil {
			g.fits, err = calibration.ParseFits(data)
		}
		if err != nil {
			g.errs = append(g.errs, fmt.Sprintf("gateway.fits: %v", err))
		}
	}
	if len(cfg.Providers) == 0 {
		g.errs = append(g.errs, "no providers are configured: add a providers: list (the chain, in order) to the configuration")
	}
	router := o.Router
	for _, pc := range cfg.Providers {
		timeout := pc.Timeout.Or(g.timeout)
		switch pc.Kind {
		case "engine":
			if router == nil {
				r, err := fleet.FromConfig(cfg.Nodes, cfg.Aliases, o.Getenv, nil)
				if err != nil {
					g.errs = append(g.errs, fmt.Sprintf("nodes: %v", err))
					continue
				}
				router = r
			}
			g.providers = append(g.providers, &engineProvider{name: pc.Name, model: pc.Model, timeout: timeout, maxOptions: pc.MaxOptions, router: router})
		case "systemone":
			key := ""
			if pc.KeyEnv != "" {
				key = o.Getenv(pc.KeyEnv)
			}
			g.providers = append(g.providers, newSystemOneProvider(pc.Name, pc.Model, pc.URL, pc.KeyEnv, key, timeout, pc.MaxOptions, o.HTTP))
		}
	}
	return g
}

// ConfigErrors are the configuration's problems; none means decide asks
// the chain.
func (g *Gateway) ConfigErrors() []string { return append([]string{}, g.errs...) }

// Providers are the chain, in order.
func (g *Gateway) Providers() []Provider { return g.providers }

// paused reads the pause state. A state file that cannot be read fails
// closed: the user may have turned System 1 off before it broke, so it
// counts as paused, and the error says why.
func (g *Gateway) paused(log *slog.Logger) (bool, error) {
	if g.opt.StatePath == "" {
		return false, nil
	}
	s, err := pause.Read(g.opt.StatePath)
	if err != nil {
		log.Warn("the pause state file is unreadable; treating System 1 as paused until system1 toggle on|off rewrites it", "err", err)
		return true, err
	}
	return s.Paused, nil
}

// stateRepair is what to tell about an unreadable state file.
func stateRepair(path string, err error) string {
	return fmt.Sprintf("the pause state file %s is unreadable (%v), so System 1 fails closed and stays paused: "+
		"run system1 toggle on (or /system1:toggle on) to turn it on, or system1 toggle off to keep it off; either rewrites the file", path, err)
}

// Decide answers a raw decide request. defaultID is the request id to use
// when the request has none ("" generates one). It always returns a
// response, never a nil one.
func (g *Gateway) Decide(ctx context.Context, raw []byte, defaultID string) *Response {
	start := time.Now()
	res := &Response{Attempts: []Attempt{}, SchemaVersion: SchemaVersion, RequestID: requestID(raw, defaultID)}
	log := g.log.With("request_id", res.RequestID)
	defer func() {
		res.LatencyMS = time.Since(start).Milliseconds()
		attrs := []any{"status", res.Status, "latency_ms", res.LatencyMS, "attempts", len(res.Attempts)}
		if res.Decision != nil {
			attrs = append(attrs, "decision", *res.Decision)
		}
		if res.Confidence != nil {
			attrs = append(attrs, "confidence", *res.Confidence)
		}
		if res.Provider != nil {
			attrs = append(attrs, "provider", *res.Provider)
		}
		if res.Error != nil {
			attrs = append(attrs, "error", res.Error.Code, "message", res.Error.Message)
		}
		log.Info("decide", attrs...)
	}()

	if paused, err := g.paused(log); paused {
		res.Status = Abstained
		res.Rationale = "System 1 is paused: the user turned it off with /system1:toggle off, so no model was asked and there is no decision. " +
			"Reason this through yourself. Do not call system1_decide again until the user turns System 1 back on with /system1:toggle on."
		if err != nil {
			res.Rationale = "System 1 is paused: " + stateRepair(g.opt.StatePath, err) + ". No model was asked and there is no decision. " +
				"Reason this through yourself, and tell the user."
		}
		return res
	}
	req, problems := ParseRequest(raw)
	if len(problems) > 0 {
		msg := strings.Join(problems, "; ")
		res.fail(CodeInvalidRequest, msg, "The request was not valid: "+msg+". Nothing was asked. Fix the request and call system1_decide again, or reason it through yourself.")
		return res
	}
	if len(g.errs) > 0 {
		msg := strings.Join(g.errs, "; ")
		res.fail(CodeConfigError, msg, "System 1 is not configured correctly, so no model was asked: "+msg+
			". Reason this through yourself, and tell the user that System 1's configuration ("+g.configName()+") needs fixing; system1_health shows the details.")
		return res
	}
	threshold := g.threshold
	if req.MinConfidence != nil {
		threshold = *req.MinConfidence
	}
	res.Threshold = &threshold
	q := Query{Question: req.Question, Options: req.Options, Context: req.Context}
	ctx, cancel := context.WithTimeout(ctx, g.deadline)
	defer cancel()
	g.run(ctx, log, q, threshold, res)
	return res
}

// run asks the chain in order until a provider decides, abstains, or
// refuses the request as the caller's error.
func (g *Gateway) run(ctx context.Context, log *slog.Logger, q Query, threshold float64, res *Response) {
	n := len(q.Answers())
	var limits []string // providers skipped for the option count
	var last *Failure
	tried := 0
	for i, p := range g.providers {
		if ctx.Err() != nil {
			for _, rest := range g.providers[i:] {
				res.Attempts = append(res.Attempts, Attempt{Provider: rest.Name(), Outcome: OutcomeSkipped,
					Detail: fmt.Sprintf("not asked: the overall deadline of %s had passed", g.deadline)})
			}
			break
		}
		start := time.Now()
		if limit, err := p.MaxOptions(ctx); err != nil {
			f := Classify(err)
			f.Err = fmt.Errorf("cannot take the question: %w", err)
			if ctx.Err() != nil {
				f.Outcome = OutcomeTimeout
			}
			res.Attempts = append(res.Attempts, Attempt{Provider: p.Name(), Outcome: f.Outcome, LatencyMS: since(start), Detail: f.Error()})
			last = f
			tried++
			continue
		} else if !q.YesNo() && n > limit {
			res.Attempts = append(res.Attempts, Attempt{Provider: p.Name(), Outcome: OutcomeSkipped,
				Detail: fmt.Sprintf("not asked: %d options exceed its limit of %d", n, limit)})
			limits = append(limits, fmt.Sprintf("%s takes at most %d", p.Name(), limit))
			continue
		}
		tried++
		actx, cancel := context.WithTimeout(ctx, p.Timeout())
		r, err := p.Ask(actx, q)
		attemptTimedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		at := Attempt{Provider: p.Name(), LatencyMS: since(start)}
		if err == nil {
			if cerr := check(q, r); cerr != nil {
				err = &Failure{Outcome: OutcomeMalformed, Err: fmt.Errorf("the answer failed the gateway's checks: %w", cerr)}
			}
		}
		if err != nil {
			f := Classify(err)
			if f.Outcome == OutcomeError && attemptTimedOut {
				f.Outcome = OutcomeTimeout
			}
			if f.Outcome == OutcomeTimeout {
				switch {
				case ctx.Err() != nil:
					f.Err = fmt.Errorf("the overall deadline of %s passed while waiting: %w", g.deadline, f.Err)
				default:
					f.Err = fmt.Errorf("no answer within %s: %w", p.Timeout(), f.Err)
				}
			}
			at.Outcome, at.Detail = f.Outcome, f.Error()
			if f.Caller {
				at.Detail = "refused the request as invalid: " + f.Error()
			}
			res.Attempts = append(res.Attempts, at)
			log.Warn("provider failed", "provider", p.Name(), "outcome", f.Outcome, "caller_error", f.Caller, "err", f.Err)
			if f.Caller {
				res.fail(CodeInvalidRequest, fmt.Sprintf("provider %s refused the request: %v", p.Name(), f.Err),
					fmt.Sprintf("Provider %q refused the request as invalid (%v). It was not sent to any other provider, since they would refuse it too. "+
						"Change the request (for example fewer or shorter options, or a smaller context) and call again, or reason it through yourself.", p.Name(), f.Err))
				return
			}
			last = f
			continue
		}
		g.answer(q, p, r, threshold, &at, res)
		res.Attempts = append(res.Attempts, at)
		return
	}
	if tried == 0 && len(limits) > 0 {
		msg := fmt.Sprintf("%d options are more than any provider takes: %s", n, strings.Join(limits, ", "))
		res.fail(CodeInvalidRequest, msg, "No provider can take this many options ("+msg+"). Shortlist the options and call again, or reason it through yourself.")
		return
	}
	code := CodeProviderError
	if last != nil {
		switch last.Outcome {
		case OutcomeTimeout:
			code = CodeProviderTimeout
		case OutcomeMalformed:
			code = CodeMalformed
		}
	}
	var why []string
	for _, a := range res.Attempts {
		why = append(why, fmt.Sprintf("%s: %s (%s)", a.Provider, a.Outcome, a.Detail))
	}
	msg := "every provider failed: " + strings.Join(why, "; ")
	if len(res.Attempts) == 0 {
		msg = "no provider could be asked"
	}
	res.fail(code, msg, "No provider could answer, so there is no decision and no probability: "+strings.Join(why, "; ")+". Reason this through yourself.")
}

// answer turns a provider's reading into the response: calibrated, then
// decided or abstained.
func (g *Gateway) answer(q Query, p Provider, r Reading, threshold float64, at *Attempt, res *Response) {
	answers := q.Answers()
	model := r.Model
	if model == "" {
		model = p.Model()
	}
	d := r.Dist
	if fit, ok := g.fits.Lookup(p.Name(), model, q.Kind(), len(answers)); ok {
		d = d.Temper(fit.Temperature)
		res.Calibrated = true
	}
	reported := decision.Round(d, decimals)
	best := 0
	for i := range reported {
		if reported[i] > reported[best] || (reported[i] == reported[best] && d[i] > d[best]) {
			best = i
		}
	}
	res.Probabilities = make(Probabilities, len(answers))
	for i, a := range answers {
		res.Probabilities[i] = Probability{Option: a, P: reported[i]}
	}
	conf := reported[best]
	res.Confidence = &conf
	name := p.Name()
	res.Provider = &name
	cal := "uncalibrated"
	if res.Calibrated {
		cal = "calibrated"
	}
	choice := answers[best]
	switch {
	case r.Abstain != "":
		res.Status = Abstained
		at.Outcome = OutcomeAbstained
		at.Detail = r.Abstain
		res.Rationale = fmt.Sprintf("System 1 abstained: provider %q declined to decide (%s). Its best guess was %q at probability %.*f (%s), but there is no decision. Reason this through yourself.",
			name, r.Abstain, choice, decimals, conf, cal)
	case conf < threshold:
		res.Status = Abstained
		at.Outcome = OutcomeOK
		at.Detail = r.Detail
		res.Rationale = fmt.Sprintf("System 1 is not confident enough to decide: its best guess %q has probability %.*f (%s), under the threshold %v. There is no decision. Reason this through yourself.",
			choice, decimals, conf, cal, threshold)
	default:
		res.Status = Decided
		res.Decision = &choice
		at.Outcome = OutcomeOK
		at.Detail = r.Detail
		res.Rationale = fmt.Sprintf("System 1 decided %q with probability %.*f (%s; threshold %v), from provider %q (model %s). It is a fast intuition: act on it, and check it where a mistake would be costly.",
			choice, decimals, conf, cal, threshold, name, model)
	}
}

// fail marks the response as an error: no decision, no probabilities.
func (res *Response) fail(code, msg, rationale string) {
	res.Status = Failed
	res.Decision, res.Confidence, res.Probabilities, res.Provider = nil, nil, nil, nil
	res.Error = &Error{Code: code, Message: msg}
	res.Rationale = rationale
}

func (g *Gateway) configName() string {
	if g.opt.ConfigPath != "" {
		return g.opt.ConfigPath
	}
	return "its configuration file"
}

func since(t time.Time) int64 { return time.Since(t).Milliseconds() }
