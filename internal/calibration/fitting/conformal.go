package fitting

import (
	"errors"
	"fmt"
	"slices"

	"system1/internal/calibration"
)

// ErrTooFewForCoverage means there were too few calibration cases for
// the coverage asked: see ConformalMinCases.
var ErrTooFewForCoverage = errors.New("too few cases for the coverage")

// FitConformal fits a prediction set rule of method at coverage on
// preds, the bucket's labelled cases over the distributions the rule will
// be applied to (a fit's sets: before its calibrator, see Selection.Sets;
// a rule fitted on cases a calibrator was fitted on would not keep its
// guarantee under that calibrator): the threshold is the ceil((n+1) coverage)-th
// smallest score of the right options, the finite-sample correction that
// makes the coverage guarantee hold for n cases. Fewer than
// ConformalMinCases(coverage) cases are ErrTooFewForCoverage; a case that
// fails Prediction.Check is an error naming its index.
func FitConformal(preds []calibration.Prediction, method string, coverage float64) (calibration.Conformal, error) {
	if method != calibration.ConformalLAC && method != calibration.ConformalAPS {
		return calibration.Conformal{}, fmt.Errorf("method %q is not %s or %s", method, calibration.ConformalLAC, calibration.ConformalAPS)
	}
	if !(coverage >= calibration.MinCoverage && coverage <= calibration.MaxCoverage) {
		return calibration.Conformal{}, fmt.Errorf("coverage %v is not in [%v, %v]", coverage, calibration.MinCoverage, calibration.MaxCoverage)
	}
	scores := make([]float64, len(preds))
	for i, p := range preds {
		if err := p.Check(); err != nil {
			return calibration.Conformal{}, fmt.Errorf("case %d: %w", i, err)
		}
		scores[i] = calibration.ConformalScore(method, p.Dist, p.Expected)
	}
	n := len(preds)
	if need := calibration.ConformalMinCases(coverage); n < need {
		return calibration.Conformal{}, fmt.Errorf("%w: %d cases; coverage %v needs at least %d", ErrTooFewForCoverage, n, coverage, need)
	}
	slices.Sort(scores)
	t := scores[calibration.ConformalRank(n, coverage)-1]
	return calibration.Conformal{Method: method, Coverage: coverage, N: n, Threshold: min(max(t, 0), 1)}, nil
}
