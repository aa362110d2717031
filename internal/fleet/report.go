package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/engine"
)

// Class is what a question's failure means to the caller. Every face
// reports a class the same way: the caller's error as a refusal of the
// request (422 on /v1/systemone, invalid_request on decide), the others as
// no answer.
type Class string

// The classes of a failed question.
const (
	// CallerError: the engine refused the request itself (HTTP 400, 413,
	// 422, a context too long, more options than any node takes), so no
	// other node or provider is asked to repeat it.
	CallerError Class = "caller_error"
	// TimedOut: no answer within the time allowed.
	TimedOut Class = "timeout"
	// Malformed: the answer was not a usable reading.
	Malformed Class = "malformed"
	// NoAnswer: the nodes were down, busy, cooling down or refusing.
	NoAnswer Class = "no_answer"
)

// Classify returns the class of a question's failure, and the longest
// pause a node asked for when it was rate limited (else 0).
func Classify(err error) (Class, time.Duration) {
	var f *engine.Failure
	if !errors.As(err, &f) {
		if errors.Is(err, context.DeadlineExceeded) {
			return TimedOut, 0
		}
		return NoAnswer, 0
	}
	switch f.Kind {
	case engine.Rejected:
		return CallerError, 0
	case engine.Timeout:
		return TimedOut, 0
	case engine.Malformed:
		return Malformed, 0
	case engine.RateLimited:
		return NoAnswer, f.RetryAfter
	}
	return NoAnswer, 0
}

// Cause is a question's failure in the node's own words: without the
// node's name and the failure's class.
func Cause(err error) error {
	var f *engine.Failure
	if errors.As(err, &f) {
		return f.Err
	}
	return err
}

// Usage counts tokens as the engines reported them, summed over a
// request's questions.
type Usage struct {
	InputTokens, OutputTokens int
	// Estimated is set when an engine reported no counts and they were
	// estimated at four characters per token.
	Estimated bool
}

// Report is an answered request as every face reports it: the
// distributions after calibration, the usage summed, and the warnings a
// caller should see. It is made once, here, so that the faces agree.
type Report struct {
	// Dists are aligned with the request's questions.
	Dists []decision.Distribution
	// Calibrated is set when every distribution was tempered by a fit.
	Calibrated bool
	Usage      Usage
	// Warnings are in question order.
	Warnings []Warning
	// Engine are the distributions as the engines read them, in the
	// caller's option order, aligned with the request's questions.
	Engine []decision.Distribution
	// LabelMass is, per question, the probability the engine put on the
	// option labels at all (the mean over the orders asked); NaN where
	// the engine cannot know (after its constraint, or a System One
	// upstream) or the options went in rounds over separate prompts.
	LabelMass []float64
	// Steps are, per question, the steps applied to the engine's reading
	// in the order applied, each with the distribution it left; the last
	// one's is Dists. A step is applied only by being listed here, so
	// every face can name what it reports.
	Steps [][]decision.Step
	// FitVersion is the Revision of the fits that tempered at least one
	// distribution, "" when none did.
	FitVersion string
}

// Warning is what a caller should know of one answered question. Its
// words are the core's, the same on every face; a face only chooses how
// names are written (escaped for a header, quoted for a log).
type Warning struct {
	Question string
	// Missing are the options whose label the engine did not report, so
	// they were reported 0.
	Missing []string
	// NoFit is set when fits were given and none matched the model that
	// answered, the question's kind and its option count.
	NoFit bool
	// ConstraintFailed is set when the engine generated a token that is
	// not a label though it was to hold the first token to them.
	ConstraintFailed bool
	Model            string
	Kind             decision.Kind
	Options          int
}

// Text writes the warning, each name through name and a list of names
// through names.
func (w Warning) Text(name func(string) string, names func([]string) string) string {
	if w.ConstraintFailed {
		return fmt.Sprintf("%s: the engine's constraint did not hold (it generated a token that is not a label); its values were read as from before the constraint", name(w.Question))
	}
	if w.NoFit {
		return fmt.Sprintf("%s: no calibration fit for model %s, %s over %d options; reported as the engine gave it", name(w.Question), name(w.Model), w.Kind, w.Options)
	}
	return fmt.Sprintf("%s: options %s were not in the engine's top log-probabilities; reported 0", name(w.Question), names(w.Missing))
}

// String is the warning with names as they are.
func (w Warning) String() string {
	return w.Text(func(s string) string { return s }, func(n []string) string { return strings.Join(n, ",") })
}

// Report calibrates and sums the answers of a request every question of
// which was answered. fits, when not nil, tempers each distribution by the
// fit for provider ("" for none), the model that answered, the question's
// kind and option count; a question without a fit is reported as the
// engine gave it, with a warning.
func (res *Result) Report(req decision.Request, fits *calibration.Fits, provider string) Report {
	rep := Report{Calibrated: fits != nil}
	for i, q := range req.Questions {
		a := res.Questions[i]
		d := a.Dist
		var steps []decision.Step
		engineDist := d
		if a.Orders > 1 {
			engineDist = a.Raw
			steps = append(steps, decision.Step{Name: decision.StepDebias, Version: decision.DebiasVersion(a.Orders), Dist: d})
		}
		if a.Prior != nil {
			d = d.DivideOut(a.Prior)
			steps = append(steps, decision.Step{Name: decision.StepPrior, Version: a.PriorVersion, Dist: d})
		}
		if fits != nil {
			if ft, ok := fits.Lookup(provider, a.Model, q.Kind, len(d)); ok {
				d = d.Temper(ft.Temperature)
				v := decision.TemperatureVersion(fits.Version, ft.Temperature, ft.Date, fits.Revision)
				steps = append(steps, decision.Step{Name: decision.StepTemperature, Version: v, Dist: d})
				rep.FitVersion = fits.Revision
			} else {
				rep.Calibrated = false
				rep.Warnings = append(rep.Warnings, Warning{Question: q.ID, NoFit: true, Model: a.Model, Kind: q.Kind, Options: len(d)})
			}
		}
		rep.Dists = append(rep.Dists, d)
		rep.Engine = append(rep.Engine, engineDist)
		rep.LabelMass = append(rep.LabelMass, a.Mass)
		rep.Steps = append(rep.Steps, steps)
		rep.Usage.InputTokens += a.InputTokens
		rep.Usage.OutputTokens += a.OutputTokens
		rep.Usage.Estimated = rep.Usage.Estimated || a.Estimated
		if a.ConstraintFailed {
			rep.Warnings = append(rep.Warnings, Warning{Question: q.ID, ConstraintFailed: true})
		}
		if len(a.Missing) > 0 {
			rep.Warnings = append(rep.Warnings, Warning{Question: q.ID, Missing: a.Missing})
		}
	}
	return rep
}
