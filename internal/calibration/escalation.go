package calibration

import (
	"fmt"
	"math"
)

// EscalationDelta is the risk a certified escalation threshold is wrong:
// with probability at least 1-EscalationDelta, the error of the answers a
// cascade stage keeps at its threshold is at most the target.
const EscalationDelta = 0.05

// Escalation is a cascade stage's certified threshold for one target error,
// learnt from outcomes (fitting.CertifyEscalation) in the manner of
// Learn-then-Test (Angelopoulos et al. 2021): keep a stage's answer when its
// calibrated confidence is at least Threshold, else ask the next stage.
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
		if math.Abs(e.TargetError-target) < Edge {
			return e, true
		}
	}
	return Escalation{}, false
}
