package fitting

import (
	"fmt"
	"slices"

	"system1/internal/calibration"
)

// SetCoverages are the coverages a refit fits prediction sets at: 0.50
// to 0.99 by 0.01. A request for another coverage in that range gets
// the set of the least of them at or above it (Fit.SetFor), so its
// guarantee holds for what was asked, and the answer names the level
// the set is built for.
func SetCoverages() []float64 {
	out := make([]float64, 0, 50)
	for i := 50; i <= 99; i++ {
		out = append(out, float64(i)/100)
	}
	return out
}

// HeldOut is the selection's cases as they will be served, each
// calibrated by a calibrator that did not see it: out of fold under the
// adopted calibrator, or under the current one (fitted before) when
// none was adopted, and under the confidence map too where one was
// adopted, as AdoptedFit's gate is chosen. A gate and escalations are
// chosen on them. A current calibrator kept with its map is served
// under that map, so its cases are mapped by it.
func (s *Selection) HeldOut() []calibration.Prediction {
	if s.Map.Adopt {
		return slices.Clone(s.Map.oof)
	}
	// s.oof is under the calibrator's base; its map composes after, as
	// Calibrator.Apply serves it (none: the cases as they are).
	return calibration.Calibrate(s.oof, calibration.Identity().WithMap(s.Calibrator.Map, s.Calibrator.Kind))
}

// Sets fits split conformal sets of method (ConformalLAC or
// ConformalAPS) at each coverage on the selection's cases, on the scores
// of the distributions as they will be served, calibrated, and measures
// each rule as Holdout by cross-validation: each fold's cases under a
// threshold fitted on the other folds' cases alone, pooled. A coverage
// the cases are too few for (ConformalMinCases) gets no set; one a
// fold's complement is too few for gets no Holdout. The sets come in the
// order of coverages.
//
// The selection's calibrator is fitted on these same cases, so a case's
// score under it is not exchangeable with a new answer's, and a
// threshold on those scores would not keep the guarantee (out-of-fold
// scores come close on average but not for every sample: on a simulated
// biased model, 213 cases a loop, their coverage at 0.8 fell under the
// level less the exact slack in 8 to 12 of 60 draws, where exchangeable
// scores fell under it in 3). So the sets are split conformal: the
// calibrator's method is fitted again on the requests of the first few
// folds (setFolds), and the threshold rests on the cases of the other
// folds scored under it, which that calibrator never saw; the rule
// carries its calibrator (Conformal.Calibrator) and is applied under it.
// The guarantee is then exact for the other folds' count. A selection of
// no calibrator (or one whose refit is none) needs no split: the
// threshold rests on every case as it came. The confidence map is left
// out: it moves only the answer's probability and is fitted on the same
// cases.
func (s *Selection) Sets(method string, coverages []float64) ([]calibration.Conformal, error) {
	if method != calibration.ConformalLAC && method != calibration.ConformalAPS {
		return nil, fmt.Errorf("method %q is not %s or %s", method, calibration.ConformalLAC, calibration.ConformalAPS)
	}
	cases, from := s.preds, 0 // the rules rest on the folds from on
	var setCal *calibration.Calibrator
	if base := s.Calibrator.Base(); base.Method != calibration.MethodNone {
		m := setFolds(base, s.fold, s.Folds)
		train := inFolds(s.preds, s.fold, func(k int) bool { return k < m })
		if c, err := FitMethod(base.Method, train); err == nil && c.Method != calibration.MethodNone && !(c.Method == calibration.MethodTemperature && c.Temperature == 1) {
			setCal = &c
			cases = calibration.Calibrate(s.preds, c)
			from = m
		}
	}
	out := FitSets(inFolds(cases, s.fold, func(k int) bool { return k >= from }), method, coverages)
	if len(out) == 0 {
		return nil, nil
	}
	for j := range out {
		out[j].Calibrator = setCal
	}
	// Per fold of the cases the rules rest on: the scores of the other
	// such folds' cases, sorted once, give every coverage's threshold.
	hold := make([]calibration.SetCount, len(out))
	short := make([]bool, len(out)) // some fold's complement is too few for the rule
	for k := range s.Folds {
		var train []float64
		var test []calibration.Prediction
		for i, p := range cases {
			switch {
			case s.fold[i] < from:
			case s.fold[i] == k:
				test = append(test, p)
			default:
				train = append(train, calibration.ConformalScore(method, p.Dist, p.Expected))
			}
		}
		if len(test) == 0 {
			continue
		}
		slices.Sort(train)
		for j, rule := range out {
			r := calibration.ConformalRank(len(train), rule.Coverage)
			if r > len(train) {
				short[j] = true
				continue
			}
			fr := calibration.Conformal{Method: method, Coverage: rule.Coverage, N: len(train), Threshold: min(max(train[r-1], 0), 1)}
			for _, p := range test {
				hold[j].Add(fr.Set(p.Dist), p.Expected, 1)
			}
		}
	}
	for j := range out {
		if h := hold[j].Coverage(); !short[j] && h.N > 0 {
			out[j].Holdout = &h
		}
	}
	return out, nil
}

// SetCasesPerParameter is how many cases per parameter the sets'
// calibrator is refitted on at least (setFolds).
const SetCasesPerParameter = 20

// setFolds is how many folds, 0 to m-1, the sets' calibrator c is
// refitted on: the fewest whose cases number SetCasesPerParameter per
// parameter of c, and at most half the folds, rounded up. Every case the
// calibrator does not take goes to the threshold, whose coverage, given
// its n cases, spreads as Beta(k, n+1-k): the more it rests on, the
// nearer the level a fit's sets cover. A temperature (one parameter)
// takes one fold; vector scaling, a bias per option, takes more, since
// its fit on a fifth of the outcomes made the sets larger (on agnews in
// bench/quality, four options on about 50 cases: 0.07 options a set
// more than on three fifths, at 10 cases per parameter; at 20 it takes
// two fifths and lost nothing; docs/quality.md).
func setFolds(c calibration.Calibrator, fold []int, folds int) int {
	need := SetCasesPerParameter
	if c.Method == calibration.MethodVector {
		need *= 1 + len(c.Biases)
	}
	count := make([]int, folds)
	for _, k := range fold {
		count[k]++
	}
	m, n := 0, 0
	for m < (folds+1)/2 && n < need {
		n += count[m]
		m++
	}
	return m
}

// FitSets fits split conformal rules of method (ConformalLAC or
// ConformalAPS) at each coverage on preds, over the distributions the
// rules will be applied to (FitConformal), in the order of coverages,
// leaving out the coverages preds are too few for; nil when there are
// none, or for a method that is neither.
func FitSets(preds []calibration.Prediction, method string, coverages []float64) []calibration.Conformal {
	var out []calibration.Conformal
	for _, c := range coverages {
		if rule, err := FitConformal(preds, method, c); err == nil {
			out = append(out, rule)
		}
	}
	return out
}
