package answer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fleet"
)

// Usage counts tokens as the engines reported them, summed over a
// request's questions.
type Usage struct {
	InputTokens, OutputTokens int
	// Estimated is set when an engine reported no counts and they were
	// estimated at four characters per token.
	Estimated bool
}

// Add is u and v summed: their tokens, estimated when either's were.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens, Estimated: u.Estimated || v.Estimated}
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
	// OtherBuild is set with NoFit when the fits hold one for the model,
	// kind and option count, learnt on another build than the one that
	// served the answer: the model changed on Node at Since, to the
	// build Fingerprint, and answers are reported uncalibrated until
	// outcomes under it refit it.
	OtherBuild bool
	// SetsOnly is set with NoFit when the fit found carries prediction
	// sets and no calibrator (none was adopted on its outcomes).
	SetsOnly    bool
	Node        string
	Fingerprint string
	Since       time.Time
	Model       string
	Kind        decision.Kind
	Options     int
}

// Text writes the warning, each name through name and a list of names
// through names.
func (w Warning) Text(name func(string) string, names func([]string) string) string {
	if w.ConstraintFailed {
		return fmt.Sprintf("%s: the engine's constraint did not hold (it generated a token that is not a label); its values were read as from before the constraint", name(w.Question))
	}
	if w.OtherBuild {
		return fmt.Sprintf("%s: the calibration fit for model %s, %s over %d options, was learnt on another build: the model node %s serves changed at %s (now fingerprint %s); reported as the engine gave it until outcomes under this build refit it",
			name(w.Question), name(w.Model), w.Kind, w.Options, name(w.Node), w.Since.UTC().Format(time.RFC3339), name(w.Fingerprint))
	}
	if w.SetsOnly {
		return fmt.Sprintf("%s: the calibration fit for model %s, %s over %d options, has prediction sets but no calibrator (none beat the engine's own probabilities on its outcomes); reported as the engine gave it", name(w.Question), name(w.Model), w.Kind, w.Options)
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

// report applies the steps to the fleet's readings of req, every question
// of which was answered: the orders' average (debias) and the prior the
// fleet read, then the temperature fits hold for the provider ("" for
// none), the model that answered, the question's kind and its option
// count. A question without a fit is reported as the engine gave it, with
// a warning.
func report(req Request, res *fleet.Result, fits *calibration.Fits) *Answer {
	// A fits file that holds no fit yet (the one a learning loop starts
	// with) names none to miss: its answers are as without one, with no
	// warning each, so that no outcomes is no change.
	loaded := fits != nil && len(fits.Fits) > 0
	a := &Answer{Model: res.Model, Calibrated: loaded, Fits: fits, Questions: make([]Question, len(req.Questions)), Cost: new(decision.USD)}
	for i, q := range req.Questions {
		got := res.Questions[i]
		d := got.Dist
		out := Question{Engine: d, LabelMass: got.Mass, Model: got.Model, Node: got.Node, Fingerprint: got.Fingerprint, Since: got.Since,
			Attempts: got.Attempts, Cost: questionCost(got), InputTokens: got.InputTokens, OutputTokens: got.OutputTokens}
		a.Cost = AddCost(a.Cost, out.Cost)
		if got.Orders > 1 {
			out.Engine = got.Raw
			out.Steps = append(out.Steps, decision.Step{Name: decision.StepDebias, Version: decision.DebiasVersion(got.Orders), Dist: d})
		}
		// A prior that gives an option nothing (its label was not among
		// what the engine reported) says nothing of the lean toward it: no
		// floor stands in for it, and the step is neither applied nor named.
		if got.Prior != nil && !slices.ContainsFunc(got.Prior, func(p float64) bool { return !(p > 0) }) {
			d = d.DivideOut(got.Prior)
			out.Steps = append(out.Steps, decision.Step{Name: decision.StepPrior, Version: got.PriorVersion, Dist: d})
		}
		if d != nil { // a question the node declined has nothing to calibrate
			ft, fitted, other := fits.LookupServed(req.Provider, got.Model, got.Fingerprint, q.Kind, len(d))
			uncalibrated := d
			switch {
			case fitted && ft.Calibrates():
				// The fit's whole calibrator, composed once: a temperature (with
				// a bias per position, or keeping a score's level), then its
				// confidence map, named as applied.
				d = ft.Apply(d)
				v := decision.CalibrationVersion(fits.Version, ft.Calibrator().String(), ft.Date, fits.Revision)
				out.Steps = append(out.Steps, decision.Step{Name: decision.StepTemperature, Version: v, Dist: d})
				a.FitVersion = fits.Revision
			case fitted:
				// A fit a refit wrote for its prediction sets alone: nothing
				// was learnt to apply, so the answer is not calibrated.
				a.Calibrated = false
				a.Warnings = append(a.Warnings, Warning{Question: q.ID, NoFit: true, SetsOnly: true, Model: got.Model, Kind: q.Kind, Options: len(d)})
			case loaded:
				a.Calibrated = false
				a.Warnings = append(a.Warnings, Warning{Question: q.ID, NoFit: true, OtherBuild: other, Node: got.Node, Fingerprint: got.Fingerprint, Since: got.Since,
					Model: got.Model, Kind: q.Kind, Options: len(d)})
			}
			if req.Coverage > 0 {
				out.Set = predictionSet(loaded, fitted, ft, uncalibrated, req.Coverage)
			}
		}
		out.Dist = d
		a.Questions[i] = out
		a.Usage = a.Usage.Add(Usage{InputTokens: got.InputTokens, OutputTokens: got.OutputTokens, Estimated: got.Estimated})
		if got.ConstraintFailed {
			a.Warnings = append(a.Warnings, Warning{Question: q.ID, ConstraintFailed: true})
		}
		if len(got.Missing) > 0 {
			a.Warnings = append(a.Warnings, Warning{Question: q.ID, Missing: got.Missing})
		}
	}
	a.Calibrated = a.calibratedSome()
	return a
}

// calibratedSome is a's Calibrated where some question has a
// distribution: one whose every question was declined had nothing
// calibrated, whatever fits were loaded.
func (a *Answer) calibratedSome() bool {
	return a.Calibrated && slices.ContainsFunc(a.Questions, func(q Question) bool { return q.Dist != nil })
}

// Set is a question's prediction set at the coverage a request asked
// for: split conformal, from the labelled outcomes of the fit's model,
// kind and option bucket (calibration.Fit.SetFor), over the distribution
// before the fit's calibrator scored under the rule's own calibrator
// (calibration.Conformal.SetOf: one fitted apart from the outcomes its
// threshold rests on, so that the guarantee holds). For exchangeable
// answers it holds the right option at least Coverage of the time.
type Set struct {
	// Options are the indices of the options in the set, in option
	// order: empty (not nil) when every option looks less likely than
	// the right ones did, and Note says what that means; nil when there
	// is no set, and Note says why.
	Options []int
	// Coverage is the level the set is built for: the least the fit has
	// at or above the one asked. Outcomes is how many labelled outcomes
	// its threshold rests on, and Method its score (lac or aps).
	Coverage float64
	Outcomes int
	Method   string
	// Note says why there is no set, or what an empty one means.
	Note string
}

// CheckCoverage says what is wrong with a coverage a request asks sets
// at: one outside [calibration.MinCoverage, MaxCoverage], the range every
// face takes.
func CheckCoverage(c float64) error {
	if !(c >= calibration.MinCoverage && c <= calibration.MaxCoverage) {
		return fmt.Errorf("coverage must be a number in [%v,%v]", calibration.MinCoverage, calibration.MaxCoverage)
	}
	return nil
}

// predictionSet is the set of d, before the fit's calibrator (the rule
// applies its own), at coverage by fit ft (fitted reports whether there
// is one; loaded whether any fits are).
func predictionSet(loaded, fitted bool, ft calibration.Fit, d decision.Distribution, coverage float64) *Set {
	need := calibration.ConformalMinCases(coverage)
	switch {
	case !loaded:
		return &Set{Note: "no calibration fits are loaded, so there are no outcomes to build a set on"}
	case !fitted:
		return &Set{Note: "no calibration fit for this model, kind and option count, so there are no outcomes to build a set on"}
	}
	rule, ok := ft.SetFor(coverage)
	if !ok {
		if reach, n := ft.SetsReach(); n > 0 {
			// The levels the fit has sets at fall short of the one asked:
			// too few outcomes for a higher one, or none was fitted.
			note := fmt.Sprintf("the fit's sets reach coverage %v at most, on %d outcomes; none is built for coverage %v", reach, n, coverage)
			if n < need {
				note += fmt.Sprintf(", which needs at least %d", need)
			}
			return &Set{Note: note}
		}
		return &Set{Note: fmt.Sprintf("the fit has no prediction sets yet; a set at coverage %v needs at least %d outcomes", coverage, need)}
	}
	set := rule.SetOf(d)
	if set == nil {
		return &Set{Note: "the distribution is not one a set can be made of"}
	}
	out := &Set{Options: set, Coverage: rule.Coverage, Outcomes: rule.N, Method: rule.Method}
	if len(set) == 0 {
		out.Note = fmt.Sprintf("the prediction set is empty: at coverage %v no option is as likely as the right ones were on %d outcomes, so none can be stood behind", rule.Coverage, rule.N)
	}
	return out
}
