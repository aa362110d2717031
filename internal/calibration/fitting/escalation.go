package fitting

import (
	"errors"
	"fmt"
	"math"

	"system1/internal/calibration"
)

// escalationGrid is the fixed grid of thresholds an escalation threshold
// is chosen from, strictest first: the order fixed-sequence testing tests
// them in. It is fixed before any outcome is seen, as Learn-then-Test
// requires; a grid drawn from the observed confidences would not be.
func escalationGrid() []float64 {
	g := []float64{0.999, 0.995}
	for c := 99; c >= 50; c-- {
		g = append(g, float64(c)/100)
	}
	return g
}

// CertifyEscalation learns a stage's escalation threshold from the
// calibrated confidences of its answers and whether each was wrong: for
// each threshold of escalationGrid, strictest first, the one-sided
// Clopper–Pearson upper bound at 1-delta on the error of the answers at
// or above it; it stops at the first whose bound exceeds target and
// certifies the last that passed (fixed-sequence testing, which needs no
// correction for the many thresholds tried). A threshold keeping too few
// answers for even none wrong to pass (ln(delta)/ln(1-target) of them) is
// skipped, not failed: which are skipped depends on the confidences alone,
// never on the outcomes, so the sequence is still fixed given them. A
// target or delta outside (0, 1) is an error.
func CertifyEscalation(conf []float64, wrong []bool, target, delta float64) (calibration.Escalation, error) {
	switch {
	case !(target > 0 && target < 1):
		return calibration.Escalation{}, fmt.Errorf("target error %v is not in (0, 1)", target)
	case !(delta > 0 && delta < 1):
		return calibration.Escalation{}, fmt.Errorf("delta %v is not in (0, 1)", delta)
	case len(conf) != len(wrong):
		return calibration.Escalation{}, errors.New("confidences and outcomes differ in number")
	}
	e := calibration.Escalation{TargetError: target, Delta: delta, N: len(conf), UpperBound: 1}
	minKept := int(math.Ceil(math.Log(delta) / math.Log(1-target)))
	for _, t := range escalationGrid() {
		kept, nwrong := 0, 0
		for i, c := range conf {
			if c >= t-calibration.Edge {
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

// SetEscalations learns fit f's escalation at each target from served: the
// fit's cases as they are served, each calibrated by a calibrator that
// did not see it (Selection.HeldOut), as a gate is chosen.
func SetEscalations(f *calibration.Fit, served []calibration.Prediction, targets []float64) {
	f.Escalations = nil
	conf, wrong := outcomes(served)
	for _, t := range targets {
		if _, ok := f.EscalationFor(t); ok {
			continue // one per target error, however many cascades share it
		}
		if e, err := CertifyEscalation(conf, wrong, t, calibration.EscalationDelta); err == nil {
			f.Escalations = append(f.Escalations, e)
		}
	}
}
