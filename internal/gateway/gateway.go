package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
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
	// ConfigErrors are problems met reading the file and building what
	// it describes. New adds those of its content. Any problem makes
	// decide answer config_error.
	ConfigErrors []error
	// Answer is the answer path the chain's links ask: over the fleet of
	// the configuration's nodes, with the fits and the decision log. Nil
	// when none could be built, which ConfigErrors says why.
	Answer *answer.Service
	// Log receives one line per call, each with its request id.
	Log *slog.Logger
	// StatePath is the pause state file, read on every call.
	StatePath string
	// Version is the gateway's version, as reported by health.
	Version string
	// Wording names the face's own commands in the texts; the zero value
	// names none.
	Wording Wording
	// Face names the face in the records: decisionlog.FaceDecide when
	// empty.
	Face string
}

// Wording is how a face names its own commands in the gateway's texts
// (rationales, health summaries), which otherwise name none: the MCP face
// names its tools and the plugin's toggle.
type Wording struct {
	// Decide and Health name the calls that decide and report health;
	// empty is "decide" and "health".
	Decide, Health string
	// Off and On are how the user pauses and resumes System 1; empty says
	// nothing of how.
	Off, On string
}

func (w Wording) decide() string { return cmp.Or(w.Decide, "decide") }
func (w Wording) health() string { return cmp.Or(w.Health, "health") }

// with is " with " and a command, or nothing.
func with(command string) string {
	if command == "" {
		return ""
	}
	return " with " + command
}

// Gateway decides.
type Gateway struct {
	opt       Options
	errs      []string
	links     []*link
	threshold float64
	// minLabelMass is gateway.min_label_mass; 0 abstains on no mass.
	minLabelMass float64
	timeout      time.Duration
	deadline     time.Duration
	fitsPath     string
	log          *slog.Logger
}

// New builds a gateway from its configuration, over the answer path it
// is given. It never fails: what is wrong is kept and reported by health
// and capabilities, and decide answers config_error until it is fixed.
func New(o Options) *Gateway {
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	o.Face = cmp.Or(o.Face, decisionlog.FaceDecide)
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
	cfg.Normalize()
	if cfg.OldForm {
		g.log.Warn("the configuration's providers: list is the old form; it was read as gateway.chain and nodes (see the README's Configuration)", "request_id", "-", "config", o.ConfigPath)
	}
	for _, err := range cfg.Check() {
		g.errs = append(g.errs, err.Error())
	}
	gw := cfg.Gateway
	if t := gw.Threshold; t != nil && *t >= 0 && *t <= 1 { // else Check reported it
		g.threshold = *t
	}
	if m := gw.MinLabelMass; m != nil && *m >= 0 && *m <= 1 {
		g.minLabelMass = *m
	}
	g.timeout = gw.Timeout.Or(DefaultTimeout)
	g.deadline = gw.Deadline.Or(DefaultDeadline)
	g.fitsPath = cfg.Resolve(gw.Fits)
	if len(cfg.Gateway.Chain) == 0 {
		g.errs = append(g.errs, "no chain is configured: add gateway.chain (the models to ask, in order) to the configuration")
	}
	if o.Answer == nil {
		if len(g.errs) == 0 {
			g.errs = append(g.errs, "nodes: no fleet was built from the configuration")
		}
		return g
	}
	for _, lc := range cfg.Gateway.Chain {
		l := &link{name: lc.Name, model: lc.Model, kind: "engine", timeout: lc.Timeout.Or(g.timeout), maxOptions: lc.MaxOptions, answer: o.Answer}
		if len(lc.Nodes) > 0 {
			l.answer, l.nodes = o.Answer.Only(lc.Nodes), lc.Nodes
			l.kind = "systemone"
			for _, n := range cfg.Nodes {
				if slices.Contains(lc.Nodes, n.Name) {
					if n.Dialect != "systemone" {
						l.kind, l.url = "engine", ""
						break
					}
					l.url = n.URL
				}
			}
		}
		g.links = append(g.links, l)
	}
	return g
}

// ConfigErrors are the configuration's problems; none means decide asks
// the chain.
func (g *Gateway) ConfigErrors() []string { return append([]string{}, g.errs...) }

// Chain names the links of the chain, in order.
func (g *Gateway) Chain() []string {
	names := make([]string, len(g.links))
	for i, l := range g.links {
		names[i] = l.name
	}
	return names
}

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

// Paused reports the pause switch for a face to show: whether decide
// abstains without asking a model, and, when the state file is unreadable
// (which fails closed), what is wrong and how to repair it.
func (g *Gateway) Paused() (paused bool, problem string) {
	paused, err := g.paused(g.log)
	if err != nil {
		problem = g.opt.Wording.stateRepair(g.opt.StatePath, err)
	}
	return paused, problem
}

// stateRepair is what to tell about an unreadable state file: the CLI's
// toggle repairs it from any face, and a face may name its own command.
func (w Wording) stateRepair(path string, err error) string {
	alt := ""
	if w.On != "" && w.On != "system1 toggle on" {
		alt = " (or " + w.On + ")"
	}
	return fmt.Sprintf("the pause state file %s is unreadable (%v), so System 1 fails closed and stays paused: "+
		"run system1 toggle on%s to turn it on, or system1 toggle off to keep it off; either rewrites the file", path, err, alt)
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
		w := g.opt.Wording
		res.Rationale = "System 1 is paused: the user turned it off" + with(w.Off) + ", so no model was asked and there is no decision. " +
			"Reason this through yourself. Do not call " + w.decide() + " again until the user turns System 1 back on" + with(w.On) + "."
		if err != nil {
			res.Rationale = "System 1 is paused: " + w.stateRepair(g.opt.StatePath, err) + ". No model was asked and there is no decision. " +
				"Reason this through yourself, and tell the user."
		}
		return res
	}
	req, problems := ParseRequest(raw)
	if len(problems) > 0 {
		msg := strings.Join(problems, "; ")
		res.fail(CodeInvalidRequest, msg, "The request was not valid: "+strings.TrimSuffix(msg, ".")+". Nothing was asked. Fix the request and call "+g.opt.Wording.decide()+" again, or reason it through yourself.")
		return res
	}
	if len(g.errs) > 0 {
		msg := strings.Join(g.errs, "; ")
		res.fail(CodeConfigError, msg, "System 1 is not configured correctly, so no model was asked: "+msg+
			". Reason this through yourself, and tell the user that System 1's configuration ("+cmp.Or(g.opt.ConfigPath, "its configuration file")+") needs fixing; "+g.opt.Wording.health()+" shows the details.")
		return res
	}
	threshold := g.threshold
	if req.MinConfidence != nil {
		threshold = *req.MinConfidence
	}
	res.Threshold = &threshold
	minMass := g.minLabelMass
	if req.MinLabelMass != nil {
		minMass = *req.MinLabelMass
	}
	q := query(req)
	ctx, cancel := context.WithTimeout(ctx, g.deadline)
	defer cancel()
	who := answer.Request{Face: g.opt.Face, RequestID: res.RequestID, Start: start,
		Gate: answer.Gate{MinLabelMass: minMass, None: q.NoneOption}}
	if req.Coverage != nil {
		who.Coverage = *req.Coverage
	}
	g.run(ctx, log, q, threshold, res, who)
	return res
}

// run asks the chain in order until a provider decides, abstains, or
// refuses the request as the caller's error. A provider whose model
// ranked none of the options passes the question on; where no later one
// answers, its abstention is the answer.
func (g *Gateway) run(ctx context.Context, log *slog.Logger, q query, threshold float64, res *Response, who answer.Request) {
	n := q.asked()
	var limits []string // providers skipped for the option count
	var last *failure
	// unread is the first link whose model ranked none of the options,
	// and its reading: its refusal is the answer only when no later link
	// gives a reading, since a stronger model may rank them.
	var unread *link
	var unreadReading reading
	tried := 0
	for i, p := range g.links {
		if ctx.Err() != nil {
			why := fmt.Sprintf("not asked: the overall deadline of %s had passed", g.deadline)
			if context.Cause(ctx) == context.Canceled {
				why = "not asked: the caller gave up"
			} else if cause := stoppedBy(ctx); cause != nil {
				why = fmt.Sprintf("not asked: the call was stopped (%v)", cause)
			}
			for _, rest := range g.links[i:] {
				res.Attempts = append(res.Attempts, Attempt{Provider: rest.name, Outcome: OutcomeSkipped, Detail: why})
			}
			break
		}
		start := time.Now()
		if limit, err := p.limit(ctx); err != nil {
			f := &failure{outcome: OutcomeError, err: fmt.Errorf("cannot take the question: %w", err)}
			if ctx.Err() != nil {
				f.outcome = OutcomeTimeout
			}
			res.Attempts = append(res.Attempts, Attempt{Provider: p.name, Outcome: f.outcome, LatencyMS: since(start), Detail: f.Error()})
			last = f
			tried++
			continue
		} else if !q.YesNo() && n > limit {
			res.Attempts = append(res.Attempts, Attempt{Provider: p.name, Outcome: OutcomeSkipped,
				Detail: fmt.Sprintf("not asked: %s exceed its limit of %d", q.optionsAsked(), limit)})
			limits = append(limits, fmt.Sprintf("%s takes at most %d", p.name, limit))
			continue
		}
		tried++
		actx, cancel := context.WithTimeout(ctx, p.timeout)
		r, err := p.ask(actx, q, who)
		attemptTimedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		at := Attempt{Provider: p.name, LatencyMS: since(start)}
		if err != nil {
			var f *failure
			if !errors.As(err, &f) {
				f = &failure{outcome: OutcomeError, err: err}
			}
			if f.outcome == OutcomeError && attemptTimedOut {
				f.outcome = OutcomeTimeout
			}
			if f.outcome == OutcomeTimeout {
				switch {
				case context.Cause(ctx) == context.Canceled:
					f.err = fmt.Errorf("the caller gave up while waiting: %w", f.err)
				case stoppedBy(ctx) != nil:
					f.err = fmt.Errorf("the call was stopped (%v) while waiting: %w", stoppedBy(ctx), f.err)
				case ctx.Err() != nil:
					f.err = fmt.Errorf("the overall deadline of %s passed while waiting: %w", g.deadline, f.err)
				default:
					f.err = fmt.Errorf("no answer within %s: %w", p.timeout, f.err)
				}
			}
			at.Outcome, at.Detail = f.outcome, f.Error()
			if f.caller {
				at.Detail = "refused the request as invalid: " + f.Error()
			}
			res.Attempts = append(res.Attempts, at)
			if context.Cause(ctx) == context.Canceled {
				// The caller went away (its client gave up): not the
				// provider's failure.
				log.Debug("the caller gave up while a provider was asked", "provider", p.name, "err", f.logged())
			} else if cause := stoppedBy(ctx); cause != nil {
				log.Debug("the call was stopped while a provider was asked", "provider", p.name, "cause", cause, "err", f.logged())
			} else {
				log.Warn("provider failed", "provider", p.name, "outcome", f.outcome, "caller_error", f.caller, "err", f.logged())
			}
			if f.caller {
				res.fail(CodeInvalidRequest, fmt.Sprintf("provider %s refused the request: %v", p.name, f.err),
					fmt.Sprintf("Provider %q refused the request as invalid (%v). It was not sent to any other provider, since they would refuse it too. "+
						"Change the request (for example fewer or shorter options, or a smaller context) and call again, or reason it through yourself.", p.name, f.err))
				return
			}
			last = f
			continue
		}
		if r.Refusal != nil && r.Refusal.Reason == answer.RefusedUnranked {
			at.Outcome, at.Detail = OutcomeAbstained, r.declined()
			res.Attempts = append(res.Attempts, at)
			if unread == nil {
				unread, unreadReading = p, r
			}
			continue
		}
		g.answer(q, p, r, threshold, &at, res)
		res.Attempts = append(res.Attempts, at)
		return
	}
	if unread != nil {
		g.answer(q, unread, unreadReading, threshold, &Attempt{}, res) // its attempt is listed already
		return
	}
	if tried == 0 && len(limits) > 0 {
		msg := fmt.Sprintf("%s are more than any provider takes: %s", q.optionsAsked(), strings.Join(limits, ", "))
		res.fail(CodeInvalidRequest, msg, "No provider can take this many options ("+msg+"). Shortlist the options and call again, or reason it through yourself.")
		return
	}
	code := CodeProviderError
	if last != nil {
		switch last.outcome {
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

// stoppedBy is the cause ctx, a call's, was stopped for when that was
// neither its deadline nor its caller giving up (a plain cancel): serve's
// drain passing, a signal to the command line; nil otherwise.
func stoppedBy(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil || cause == context.Canceled || errors.Is(cause, context.DeadlineExceeded) {
		return nil
	}
	return cause
}

// answer turns a provider's reading into the response: calibrated, then
// decided, or abstained under threshold.
func (g *Gateway) answer(q query, p *link, r reading, threshold float64, at *Attempt, res *Response) {
	answers := q.Answers()
	model, name := cmp.Or(r.Model, p.model), p.name
	if r.answer.Cost != nil { // paid for even when the node declined
		c := r.answer.Cost.String()
		res.Cost = &c
	}
	// An abstention is kept and served again as any answer.
	res.Cache = r.answer.Cache
	if r.Dist == nil { // the node declined outright: there is no reading to report
		res.Status, res.Provider, res.Grade = Abstained, &name, GradeEscalate
		res.Calibration = &Steps{Steps: []CalibrationStep{}}
		at.Outcome, at.Detail = OutcomeAbstained, r.declined()
		if q.Coverage != nil { // no set, and set_note says why
			res.SetNote = "the provider gave no probabilities, so there is no prediction set"
		}
		if r.Refusal.Reason == answer.RefusedUnranked {
			res.Rationale = fmt.Sprintf("System 1 abstained: the model of provider %q ranked none of the options among its likeliest answers (%s), so there are no probabilities. There is no decision. Reason this through yourself, or offer options that fit.", name, r.Refusal.Detail)
		} else {
			res.Rationale = fmt.Sprintf("System 1 abstained: provider %q declined to decide (%s) and gave no probabilities. There is no decision. Reason this through yourself.", name, r.Refusal.Detail)
		}
		return
	}
	d := r.Dist
	// The options and the implicit one are one distribution, rounded as
	// one so that they sum to 1: rounded apart, each part's units left
	// over went one to every value (0.1 read 0.101).
	reported := decision.Round(d, decimals)
	var none float64  // as reported, which the rationale quotes
	if q.NoneOption { // the implicit option is last
		d = d[:len(d)-1]
		none = reported[len(reported)-1]
		res.NoneProbability, reported = &none, reported[:len(reported)-1]
	}
	res.Calibrated = r.answer.Calibrated
	res.FitVersion = r.answer.FitVersion
	if !math.IsNaN(r.LabelMass) {
		// Significant digits, not decimals: a mass of 0.000665 is not 0.
		m := decision.RoundSignificant(r.LabelMass, decision.LabelMassDigits)
		res.LabelMass = &m
	}
	res.Calibration = &Steps{Steps: []CalibrationStep{}}
	for _, st := range r.Steps {
		res.Calibration.Steps = append(res.Calibration.Steps, CalibrationStep{Name: st.Name, Version: st.Version})
	}
	best := decision.ReportedArgmax(reported, d)
	res.Probabilities = make(Probabilities, len(answers))
	for i, a := range answers {
		res.Probabilities[i] = Probability{Option: a, P: reported[i]}
	}
	conf := reported[best]
	res.Confidence = &conf
	res.Provider = &name
	cal := "uncalibrated"
	if res.Calibrated {
		cal = "calibrated"
	}
	choice := answers[best]
	// The implicit option is a runner-up too: "none fits" close behind
	// leaves the decision not clearly ahead.
	second := none
	for i, p := range reported {
		if i != best {
			second = max(second, p)
		}
	}
	res.Served = &Served{Node: r.Node, Model: model, Fingerprint: r.Fingerprint, Stage: r.Stage, Stages: r.Stages}
	gg := gradeGate(r.answer.Fits, name, model, r.Fingerprint, q.Kind(), len(r.Dist), threshold)
	res.Gate = &gg
	var why string // why the grade is not act, in the rationale's words
	res.Grade, why = grade(conf, second, gg.Value)
	// Whether the answer is refused is the answer path's one rule
	// (answer.Refusal); the gateway words it.
	reason := answer.Reason("")
	if r.Refusal != nil {
		reason = r.Refusal.Reason
	}
	if r.Set != nil {
		res.Grade, why = setGrade(res, r.Set, q, best, res.Grade, why)
	}
	res.Status = Abstained
	at.Outcome, at.Detail = OutcomeOK, r.Detail
	switch {
	case reason == answer.RefusedUpstream:
		at.Outcome, at.Detail = OutcomeAbstained, r.declined()
		res.Grade = GradeEscalate
		res.Rationale = fmt.Sprintf("System 1 abstained: provider %q declined to decide (%s). Its best guess was %q at probability %.*f (%s), but there is no decision. Reason this through yourself.",
			name, r.Refusal.Detail, choice, decimals, conf, cal)
	case reason == answer.RefusedNone:
		res.Grade = GradeEscalate
		res.Rationale = fmt.Sprintf("System 1 abstained: no option seemed to fit. The implicit option %q won at probability %.*f (%s); the best of yours was %q at %.*f. There is no decision. Reason this through yourself, or offer an option that fits.",
			decision.NoneOption, decimals, none, cal, choice, decimals, conf)
	case reason == answer.RefusedLabelMass:
		res.Grade = GradeEscalate
		res.Rationale = fmt.Sprintf("System 1 abstained: no option seemed to fit. The model put only %s of its probability on the options at all (under min_label_mass %v); among them its best guess was %q at %.*f (%s), but there is no decision. Reason this through yourself, or offer an option that fits.",
			decision.FormatLabelMass(r.LabelMass), r.Refusal.MinLabelMass, choice, decimals, conf, cal)
	case conf < threshold:
		res.Rationale = fmt.Sprintf("System 1 is not confident enough to decide: its best guess %q has probability %.*f (%s), under the threshold %v. There is no decision. Reason this through yourself.",
			choice, decimals, conf, cal, threshold)
		// A fit's gate may be under the threshold: an answer between them
		// is good enough to act on by the outcomes, but this call asked for
		// more, so there is no decision to act on: ask at best.
		if res.Grade == GradeAct {
			res.Grade = GradeAsk
		}
	default:
		res.Status = Decided
		res.Decision = &choice
		// The rationale says what the grade says: act on it only when it
		// is graded act.
		decided := fmt.Sprintf("System 1 decided %q with probability %.*f (%s; threshold %v), from provider %q (model %s)", choice, decimals, conf, cal, threshold, name, model)
		switch res.Grade {
		case GradeEscalate:
			res.Rationale = decided + ", but it is graded escalate: " + why + ". Do not act on it: reason it through yourself or hand it on."
		case GradeAsk:
			res.Rationale = decided + ", graded ask: " + why + ". Ask the user before acting on it."
		default:
			res.Rationale = decided + ". It is a fast intuition: act on it, and check it where a mistake would be costly."
		}
	}
}

// gradeGate is the confidence an answer of model's, through provider, to
// a question of kind over n labels needs to be graded act: the gate
// suggested with the fit in fits that tempered it (the same Lookup the
// report's temperature step makes, LookupServed for the build that served
// it: a gate learnt on another build does not grade its answers) where
// that fit has one, else the threshold.
// Both compare with the probability of the predicted answer, the
// confidence grade is given.
func gradeGate(fits *calibration.Fits, provider, model, fingerprint string, kind decision.Kind, n int, threshold float64) GradeGate {
	if ft, ok, _ := fits.LookupServed(provider, model, fingerprint, kind, n); ok && ft.Gate != nil {
		return GradeGate{Value: ft.Gate.Threshold, Source: GateFromFit, TargetError: ft.Gate.TargetError}
	}
	return GradeGate{Value: threshold, Source: GateFromThreshold}
}

// setGrade writes the prediction set asked for into res and returns the
// grade it allows, g (graded without the set, for why) at best, and why
// it is not act: act needs a set of one that holds the decision (best,
// among the answers); a larger set, or none, is ask at best, and an
// empty one, where every option looks less likely than the right ones
// did, escalate. An empty set is a set: written as [] with its note.
func setGrade(res *Response, set *answer.Set, q query, best int, g, why string) (string, string) {
	if set.Options == nil {
		res.SetNote = set.Note
		if g == GradeAct {
			return GradeAsk, "there is no prediction set at the coverage asked (see set_note), so nothing says it alone is likely enough"
		}
		return g, why
	}
	names := q.Answers()
	res.PredictionSet = make([]string, 0, len(set.Options))
	for _, i := range set.Options {
		if i < len(names) {
			res.PredictionSet = append(res.PredictionSet, names[i])
		} else {
			res.PredictionSet = append(res.PredictionSet, decision.NoneOption) // the implicit option, last
		}
	}
	cov, n := set.Coverage, set.Outcomes
	res.SetCoverage, res.SetOutcomes = &cov, &n
	res.SetNote = set.Note
	switch {
	case len(set.Options) == 0:
		return GradeEscalate, fmt.Sprintf("its prediction set at coverage %v is empty: no option is as likely as the right ones were", cov)
	case (len(set.Options) != 1 || set.Options[0] != best) && g == GradeAct:
		return GradeAsk, fmt.Sprintf("its prediction set at coverage %v holds %d options", cov, len(set.Options))
	}
	return g, why
}

// grade is what to do with an answer of confidence conf whose runner-up
// has second, under gate: act, ask (near the gate or a close second), or
// escalate; and, when not act, why. Under the gate by at most AskBand,
// or a runner-up within AskMargin, is ask, as docs/debiasing.md says: a
// difference of two reported decimals is off by a float error either way
// (0.8-0.1 is 0.7000000000000001, 0.55-0.45 0.10000000000000003), which
// gradeEps absorbs.
func grade(conf, second, gate float64) (string, string) {
	switch {
	case gate-conf > AskBand+gradeEps:
		return GradeEscalate, fmt.Sprintf("its probability is under the gate %v by more than %v", gate, AskBand)
	case conf < gate:
		return GradeAsk, fmt.Sprintf("its probability is just under the gate %v", gate)
	case conf-second <= AskMargin+gradeEps:
		return GradeAsk, fmt.Sprintf("the runner-up is within %v of it", AskMargin)
	}
	return GradeAct, ""
}

// gradeEps is far under the reported decimals' unit and far over the
// float error of a difference between two of them.
const gradeEps = 1e-9

// fail marks the response as an error: no decision, no probabilities.
func (res *Response) fail(code, msg, rationale string) {
	res.Status = Failed
	res.Decision, res.Confidence, res.Probabilities, res.Provider, res.Calibration, res.LabelMass, res.NoneProbability, res.Grade, res.Gate = nil, nil, nil, nil, nil, nil, nil, "", nil
	res.PredictionSet, res.SetCoverage, res.SetOutcomes, res.SetNote = nil, nil, nil, ""
	res.Error = &Error{Code: code, Message: msg}
	res.Rationale = rationale
}

func since(t time.Time) int64 { return time.Since(t).Milliseconds() }

// Refused is the response to a request refused before anything was
// asked, for the reason code names: invalid_request (it could not even
// be read: too large, too slow, cut off), or, over HTTP, unauthorized,
// forbidden, rate_limited or over_budget. id is the request id to echo
// ("" generates one).
func Refused(id, code, msg string) *Response {
	if id == "" {
		id = decisionlog.NewRequestID()
	}
	res := &Response{Attempts: []Attempt{}, SchemaVersion: SchemaVersion, RequestID: id}
	why := "The request was refused: "
	if code == CodeInvalidRequest {
		why = "The request was not valid: "
	}
	res.fail(code, msg, why+strings.TrimSuffix(msg, ".")+". Nothing was asked.")
	return res
}

// RefusedBatch is Refused for a batch: refused whole, no result.
func RefusedBatch(id, code, msg string) *BatchResponse {
	return &BatchResponse{Results: []*Response{}, SchemaVersion: SchemaVersion, RequestID: id, Error: &Error{Code: code, Message: msg}}
}

// Link is one link of the chain as the bench asks it: its model, the
// nodes it asks (the configuration's names; none for every node serving
// the model), and its endpoint when that is one System One endpoint.
type Link struct {
	Name, Model, Endpoint string
	Nodes                 []string
}

// Link returns the chain's link of that name.
func (g *Gateway) Link(name string) (Link, bool) {
	for _, l := range g.links {
		if l.name == name {
			return Link{Name: l.name, Model: l.model, Endpoint: l.url, Nodes: l.nodes}, true
		}
	}
	return Link{}, false
}
