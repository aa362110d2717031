package fitting

import (
	"fmt"
	"math"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// FitLevel fits MethodLevel's temperature on preds, score cases: the T in
// [MinTemperature, MaxTemperature] of least mean NLL, searched on log T
// as FitTemperature searches it (a grid, then golden section), 1 when no
// T does better than 1 by more than 1e-12. An empty set is ErrNoCases; a
// case that fails Check, or is not a score, is an error naming its
// index.
func FitLevel(preds []calibration.Prediction) (calibration.Calibrator, error) {
	if len(preds) == 0 {
		return calibration.Calibrator{}, ErrNoCases
	}
	for i, p := range preds {
		if err := p.Check(); err != nil {
			return calibration.Calibrator{}, fmt.Errorf("case %d: %w", i, err)
		}
		if p.Kind != decision.Score {
			return calibration.Calibrator{}, fmt.Errorf("case %d is a %s; method %s is for scores", i, p.Kind, calibration.MethodLevel)
		}
	}
	return fitLevel(preds), nil
}

func fitLevel(preds []calibration.Prediction) calibration.Calibrator {
	loss := func(u float64) float64 {
		t := math.Exp(u)
		var sum float64
		for _, p := range preds {
			sum -= math.Log(math.Max(calibration.Calibrator{Method: calibration.MethodLevel, Temperature: t}.Apply(p.Dist)[p.Expected], ProbFloor))
		}
		return sum / float64(len(preds))
	}
	return calibration.Calibrator{Method: calibration.MethodLevel, Temperature: math.Exp(minimizeLogT(loss))}
}

// minimizeLogT is the search over u = ln T that FitTemperature and the
// level fit share, for any loss:
// gridPoints points over the range, then golden section around the best
// to logTTolerance; 0 (T = 1) unless some u does better by more than
// 1e-12.
func minimizeLogT(loss func(u float64) float64) float64 {
	lo, hi := math.Log(MinTemperature), math.Log(MaxTemperature)
	step := (hi - lo) / (gridPoints - 1)
	best, bestLoss := 0, math.Inf(1)
	for i := range gridPoints {
		if l := loss(lo + float64(i)*step); l < bestLoss {
			best, bestLoss = i, l
		}
	}
	bestU := lo + float64(best)*step
	a := lo + float64(max(best-1, 0))*step
	b := lo + float64(min(best+1, gridPoints-1))*step
	invPhi := (math.Sqrt(5) - 1) / 2
	c, d := b-invPhi*(b-a), a+invPhi*(b-a)
	fc, fd := loss(c), loss(d)
	for b-a > logTTolerance {
		if fc <= fd {
			b, d, fd = d, c, fc
			c = b - invPhi*(b-a)
			fc = loss(c)
		} else {
			a, c, fc = c, d, fd
			d = a + invPhi*(b-a)
			fd = loss(d)
		}
	}
	if u := (a + b) / 2; loss(u) <= bestLoss {
		bestU, bestLoss = u, loss(u)
	}
	if loss(0) <= bestLoss+1e-12 {
		return 0
	}
	return bestU
}
