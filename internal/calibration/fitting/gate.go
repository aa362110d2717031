package fitting

import (
	"cmp"
	"math"
	"slices"

	"gonum.org/v1/gonum/mathext"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// DefaultTargetError is the share of wrong decisions a suggested gate
// keeps under, unless told otherwise.
const DefaultTargetError = 0.02

// GateConfidence is the one-sided confidence level of the bound a gate
// is chosen with.
const GateConfidence = 0.95

// Gate is a suggested confidence threshold: act on decisions at or above
// it, and the error rate among them stays under the target with
// GateConfidence.
type Gate struct {
	// Threshold is the lowest confidence whose decisions at or above it
	// pass the bound; nil when no threshold does (too few outcomes, or
	// too many wrong ones even among the most confident).
	Threshold *float64 `json:"threshold"`
	// TargetError is the error rate the bound is held under.
	TargetError float64 `json:"target_error"`
	// Coverage is the share of decisions at or above the threshold, 0
	// without one.
	Coverage float64 `json:"coverage"`
	// WrongAbove is how many wrong decisions are at or above the
	// threshold: the wrong answers that would have passed the gate.
	WrongAbove int `json:"wrong_above"`
	// Above is how many decisions are at or above it, and UpperBound the
	// one-sided Clopper–Pearson bound on their error rate.
	Above      int     `json:"above"`
	UpperBound float64 `json:"upper_bound"`
}

// SuggestGate finds the lowest confidence threshold t such that, among
// the decisions whose confidence (Prediction.Confidence) is at least t,
// the one-sided 95% Clopper–Pearson upper bound on the error rate is
// under target. Candidates are the confidences observed. Cases that fail
// Prediction.Check are left out. A target that is not in (0, 1) is
// DefaultTargetError.
//
// Clopper–Pearson rather than Wilson: it is exact (it inverts the
// binomial itself), so its coverage is at least the nominal level at
// every n, while Wilson's dips below it at small counts and error rates
// near 0, exactly where a gate is chosen. Its bound with no wrong answer,
// 1-0.05^(1/n) (about 3/n), says a gate at 2% needs at least 149 correct
// decisions above it.
func SuggestGate(preds []calibration.Prediction, target float64) Gate {
	conf, wrong := outcomes(preds)
	return suggestGate(conf, wrong, target)
}

// outcomes are the confidence of each case that passes Prediction.Check
// and whether its answer is wrong.
func outcomes(preds []calibration.Prediction) (conf []float64, wrong []bool) {
	for _, p := range preds {
		if p.Check() == nil {
			conf, wrong = append(conf, p.Confidence()), append(wrong, !p.Correct())
		}
	}
	return conf, wrong
}

// suggestGate is SuggestGate on confidences and whether each answer was
// wrong.
func suggestGate(conf []float64, wrong []bool, target float64) Gate {
	cases := make([]gateStep, len(conf))
	for i, c := range conf {
		cases[i] = gateStep{t: c, n: 1}
		if wrong[i] {
			cases[i].wrong = 1
		}
	}
	slices.SortFunc(cases, func(a, b gateStep) int { return cmp.Compare(b.t, a.t) })
	var steps []gateStep
	for _, c := range cases {
		// Every case within Edge under a step's confidence is at it.
		if k := len(steps) - 1; k >= 0 && c.t >= steps[k].t-calibration.Edge {
			steps[k].n++
			steps[k].wrong += c.wrong
			continue
		}
		if c.t <= 0 {
			// A gate at 0 gates nothing, and a fit's is in (0, 1]: what
			// is left are answers whose predicted option got no
			// probability (a score's rounded mean level can fall
			// between two modes).
			break
		}
		steps = append(steps, c)
	}
	return lowestGate(target, len(conf), steps)
}

// gateStep is a candidate threshold t with the n cases, wrong of them
// wrong, that it adds to the stricter candidates before it.
type gateStep struct {
	t        float64
	n, wrong int
}

// lowestGate is the gate at target over total cases: of the candidate
// steps, strictest first, the last whose cases at or above it pass the
// bound. A target that is not in (0, 1) is DefaultTargetError.
func lowestGate(target float64, total int, steps []gateStep) Gate {
	if !(target > 0 && target < 1) {
		target = DefaultTargetError
	}
	g := Gate{TargetError: target}
	above, wrong := 0, 0
	for _, s := range steps {
		above += s.n
		wrong += s.wrong
		if boundUnder(wrong, above, GateConfidence, target) {
			g.Threshold, g.Above, g.WrongAbove = &s.t, above, wrong
			g.Coverage = float64(above) / float64(total)
		}
	}
	if g.Threshold != nil {
		g.UpperBound = ClopperPearsonUpper(g.WrongAbove, g.Above, GateConfidence)
	}
	return g
}

// boundUnder reports whether ClopperPearsonUpper(k, n, level) < target
// without finding the bound: the bound is the p at which P(X <= k) falls
// to 1-level, and P(X <= k) = 1 - I_p(k+1, n-k) decreases in p, so the
// bound is under target exactly when I_target(k+1, n-k) > level. One
// evaluation instead of a search, per candidate threshold.
func boundUnder(k, n int, level, target float64) bool {
	switch {
	case n <= 0 || k >= n || !(target > 0):
		return false
	case target >= 1: // the bound is under 1 wherever k < n
		return true
	}
	k = max(k, 0)
	return mathext.RegIncBeta(float64(k+1), float64(n-k), target) > level
}

// WrongAbove counts the cases whose confidence reaches t (within 1e-9)
// and whose answer is wrong: the wrong answers that survive a gate at t.
func WrongAbove(preds []calibration.Prediction, t float64) int {
	n := 0
	for _, p := range preds {
		if p.Check() == nil && p.Confidence() >= t-calibration.Edge && !p.Correct() {
			n++
		}
	}
	return n
}

// ClopperPearsonUpper is the one-sided upper confidence bound, at level
// (such as 0.95), on a binomial rate after k events in n trials: the p at
// which seeing k or fewer has probability 1-level. It is 1 for n = 0, for
// k >= n and for a level that is not under 1, and otherwise the level
// quantile of Beta(k+1, n-k).
func ClopperPearsonUpper(k, n int, level float64) float64 {
	switch {
	case n <= 0 || k >= n || !(level < 1):
		return 1
	case !(level > 0):
		return 0
	}
	k = max(k, 0)
	if k == 0 { // closed form: (1-p)^n = 1-level
		return 1 - math.Pow(1-level, 1/float64(n))
	}
	return mathext.InvRegIncBeta(float64(k+1), float64(n-k), level)
}

// BucketReport is how one model, kind and option-count bucket fares over
// the decisions with outcomes: raw (as the engine answered, before any
// calibration) and calibrated (by the bucket's fit), with the gate
// suggested on the calibrated confidences. Accuracy, NLL and ECE are
// reported for every kind, and MAE for scores, raw beside calibrated,
// since a calibrator that lowers NLL can still cost answers.
type BucketReport struct {
	Model  string        `json:"model"`
	Kind   decision.Kind `json:"kind"`
	Bucket string        `json:"bucket"`
	// Outcomes is the number of decisions with an outcome measured.
	Outcomes           int     `json:"outcomes"`
	Accuracy           float64 `json:"accuracy"`
	AccuracyCalibrated float64 `json:"accuracy_calibrated"`
	ECE                float64 `json:"ece"`
	ECECalibrated      float64 `json:"ece_calibrated"`
	NLL                float64 `json:"nll"`
	NLLCalibrated      float64 `json:"nll_calibrated"`
	Brier              float64 `json:"brier"`
	BrierCalibrated    float64 `json:"brier_calibrated"`
	// MAE and MAECalibrated are the mean distance of the expected level
	// from the right one, for scores only (omitted for other kinds).
	MAE           *float64 `json:"mae,omitempty"`
	MAECalibrated *float64 `json:"mae_calibrated,omitempty"`
	// Temperature is the one applied (1: none); Method the calibrator's
	// method, with its Biases for MethodVector.
	Temperature float64   `json:"temperature"`
	Method      string    `json:"method"`
	Biases      []float64 `json:"biases,omitempty"`
	Gate        Gate      `json:"gate"`
}

// bucketReport is the report of one bucket measured raw and calibrated
// by c, with gate suggested on the calibrated confidences.
func bucketReport(model string, kind decision.Kind, bucket string, c calibration.Calibrator, raw, cal Metrics, gate Gate) BucketReport {
	return BucketReport{
		Model: model, Kind: kind, Bucket: bucket,
		Outcomes: raw.N, Accuracy: raw.Accuracy, AccuracyCalibrated: cal.Accuracy,
		ECE: raw.ECE, ECECalibrated: cal.ECE,
		NLL: raw.NLL, NLLCalibrated: cal.NLL,
		Brier: raw.Brier, BrierCalibrated: cal.Brier,
		MAE: raw.MAE, MAECalibrated: cal.MAE,
		Temperature: c.Temperature, Method: c.Method, Biases: c.Biases,
		Gate: gate,
	}
}

// SetGate suggests f's gate at target (see SuggestGate) on the cases the
// fit was made from, calibrated by f (Fit.Apply): the held-out ones when
// there are any, since the calibrator was chosen on the others, else the
// fitted ones. The gate is on the confidences f serves, its confidence
// map applied where it has one, since that is what decide grades.
// Without a threshold that passes the bound, f has no gate.
func SetGate(f *calibration.Fit, fit, held []calibration.Prediction, target float64) {
	on, preds := calibration.GateOnHeldOut, held
	if len(held) == 0 {
		on, preds = calibration.GateOnFitted, fit
	}
	f.Gate = FitGateOf(calibration.Calibrate(preds, f.Calibrator()), target, on)
}

// FitGateOf is the gate SuggestGate finds on preds at target, as a fit
// keeps it with where it was chosen, on (GateOnHeldOut or GateOnFitted);
// nil without one.
func FitGateOf(preds []calibration.Prediction, target float64, on string) *calibration.FitGate {
	conf, wrong := outcomes(preds)
	g := suggestGate(conf, wrong, target)
	if g.Threshold == nil {
		return nil
	}
	return &calibration.FitGate{Threshold: *g.Threshold, TargetError: g.TargetError, On: on, N: len(conf), Above: g.Above, WrongAbove: g.WrongAbove, UpperBound: g.UpperBound}
}
