package calibration

import (
	"errors"
	"fmt"
	"math"
)

// EscalationDelta is the risk a certified escalation threshold is wrong:
// with probability at least 1-EscalationDelta, the error of the answers a
// cascade stage keeps at its threshold is at most the target.
const EscalationDelta = 0.05

// EscalationGrid is the fixed grid of thresholds an escalation threshold
// is chosen from, strictest first: the order fixed-sequence testing tests
// them in. It is fixed before any outcome is seen, as Learn-then-Test
// requires; a grid drawn from the observed confidences would not be.
func EscalationGrid() []float64 {
	g := []float64{0.999, 0.995}
	for c := 99; c >= 50; c-- {
		g = append(g, float64(c)/100)
	}
	return g
}

// Escalation is a cascade stage's certified threshold for one target
// error, learnt from outcomes in the manner of Learn-then-Test (Angelopoulos
// et al. 2021): keep a stage's answer when its calibrated confidence is at
// least Threshold, else ask the next stage.
type Escalation struct {
	// TargetError is the error the kept answers stay under, with
	// probability at least 1-Delta.
	TargetError float64 `json:"target_error"`
	Delta       float64 `json:"delta"`
	// Threshold is the lowest grid threshold certified; Certified is false
	// when none was (too few outcomes, or too many wrong even among the
	// most confident), and then every answer escalates.
	Threshold float64 `json:"threshold"`
	Certified bool    `json:"certified"`
	// N is how many outcomes it was learnt on, Kept how many of them were
	// at or above Threshold, WrongKept how many of those were wrong, and
	// UpperBound the one-sided Clopper–Pearson bound on their error at
	// 1-Delta.
	N          int     `json:"n"`
	Kept       int     `json:"kept"`
	WrongKept  int     `json:"wrong_kept"`
	UpperBound float64 `json:"upper_bound"`
}

// CertifyEscalation learns a stage's escalation threshold from the
// calibrated confidences of its answers and whether each was wrong: for
// each threshold of grid (EscalationGrid when nil), strictest first, the
// one-sided Clopper–Pearson upper bound at 1-delta on the error of the
// answers at or above it; it stops at the first whose bound exceeds
// target and certifies the last that passed (fixed-sequence testing,
// which needs no correction for the many thresholds tried). A threshold
// keeping too few answers for even none wrong to pass
// (ln(delta)/ln(1-target) of them) is skipped, not failed: which are
// skipped depends on the confidences alone, never on the outcomes, so the
// sequence is still fixed given them. A target or delta outside (0, 1)
// is an error.
func CertifyEscalation(conf []float64, wrong []bool, target, delta float64, grid []float64) (Escalation, error) {
	switch {
	case !(target > 0 && target < 1):
		return Escalation{}, fmt.Errorf("target error %v is not in (0, 1)", target)
	case !(delta > 0 && delta < 1):
		return Escalation{}, fmt.Errorf("delta %v is not in (0, 1)", delta)
	case len(conf) != len(wrong):
		return Escalation{}, errors.New("confidences and outcomes differ in number")
	}
	if grid == nil {
		grid = EscalationGrid()
	}
	e := Escalation{TargetError: target, Delta: delta, N: len(conf), UpperBound: 1}
	minKept := int(math.Ceil(math.Log(delta) / math.Log(1-target)))
	for _, t := range grid {
		kept, nwrong := 0, 0
		for i, c := range conf {
			if c >= t-edge {
				kept++
				if wrong[i] {
					nwrong++
				}
			}
		}
		if kept < minKept {
			continue
		}
		ub := ClopperPearsonUpper(nwrong, kept, 1-delta)
		if ub > target {
			break
		}
		e.Threshold, e.Certified, e.Kept, e.WrongKept, e.UpperBound = t, true, kept, nwrong, ub
	}
	return e, nil
}

// Check says what is wrong with a stored escalation.
func (e Escalation) Check() error {
	switch {
	case !(e.TargetError > 0 && e.TargetError < 1):
		return fmt.Errorf("target_error %v is not in (0, 1)", e.TargetError)
	case !(e.Delta > 0 && e.Delta < 1):
		return fmt.Errorf("delta %v is not in (0, 1)", e.Delta)
	case e.Certified && !(e.Threshold > 0 && e.Threshold <= 1):
		return fmt.Errorf("threshold %v is not in (0, 1]", e.Threshold)
	case e.N < 0 || e.Kept < 0 || e.WrongKept < 0 || e.Kept > e.N || e.WrongKept > e.Kept:
		return fmt.Errorf("counts n %d, kept %d, wrong_kept %d do not nest", e.N, e.Kept, e.WrongKept)
	case !(e.UpperBound >= 0 && e.UpperBound <= 1):
		return fmt.Errorf("upper_bound %v is not in [0, 1]", e.UpperBound)
	}
	return nil
}

// EscalationFor is the fit's escalation at target, when one was learnt.
func (f Fit) EscalationFor(target float64) (Escalation, bool) {
	for _, e := range f.Escalations {
		if math.Abs(e.TargetError-target) < edge {
			return e, true
		}
	}
	return Escalation{}, false
}

// SetEscalations learns f's escalation at each target from served: the
// fit's cases as they are served, each calibrated by a calibrator that
// did not see it (Selection.HeldOut), as a gate is chosen.
func (f *Fit) SetEscalations(served []Prediction, targets []float64) {
	f.Escalations = nil
	var conf []float64
	var wrong []bool
	for _, p := range served {
		if p.Check() == nil {
			conf, wrong = append(conf, p.Confidence()), append(wrong, !p.Correct())
		}
	}
	for _, t := range targets {
		if e, err := CertifyEscalation(conf, wrong, t, EscalationDelta, nil); err == nil {
			f.Escalations = append(f.Escalations, e)
		}
	}
}
