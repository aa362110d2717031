package calibration

import (
	"fmt"
	"slices"
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
// none was adopted. A gate is chosen on them.
func (s *Selection) HeldOut() []Prediction { return slices.Clone(s.oof) }

// Sets fits split conformal sets of method (ConformalLAC or
// ConformalAPS) at each coverage on the selection's cases as they came,
// uncalibrated, and measures each rule as Holdout by cross-validation
// over the selection's own folds: each fold's cases under a threshold
// fitted on the other folds' cases alone, pooled. A coverage the cases
// are too few for (ConformalMinCases) gets no set; one a fold's
// complement is too few for gets no Holdout. The sets come in the order
// of coverages.
//
// The scores are of the uncalibrated distributions, not the calibrated
// ones: the calibrator is fitted on these same cases, so a case's
// calibrated score is not exchangeable with a new case's, and the
// guarantee would not hold. Out-of-fold calibrated scores come close on
// average but not for every sample (on a simulated biased model, 213
// cases a loop, two loops pooled, their coverage at 0.8 fell under the
// level less the exact slack in 8 to 12 of 60 draws, where uncalibrated
// scores fell under it in 3, the 5% the slack allows). Uncalibrated
// scores need no held-out cases, so the threshold rests on every case,
// and a calibrator adopted later leaves the sets valid. A temperature
// keeps each answer's order of options, and sets of the uncalibrated
// distributions are as small as those of the calibrated ones; a bias
// per position can reorder them, and there the sets are larger than
// calibrated ones would be.
func (s *Selection) Sets(method string, coverages []float64) ([]Conformal, error) {
	if method != ConformalLAC && method != ConformalAPS {
		return nil, fmt.Errorf("method %q is not %s or %s", method, ConformalLAC, ConformalAPS)
	}
	out := FitSets(s.preds, method, coverages)
	if len(out) == 0 {
		return nil, nil
	}
	// Per fold: the scores of the other folds' cases, sorted once, give
	// every coverage's threshold.
	hold := make([]SetCoverage, len(out))
	size := make([]int, len(out))
	ok := make([]bool, len(out))
	for i := range ok {
		ok[i] = true
	}
	for k := range s.Folds {
		var train []float64
		var test []Prediction
		for i, p := range s.preds {
			if s.fold[i] == k {
				test = append(test, p)
			} else {
				train = append(train, conformalScore(method, p.Dist, p.Expected))
			}
		}
		slices.Sort(train)
		for j, rule := range out {
			r := conformalRank(len(train), rule.Coverage)
			if r > len(train) {
				ok[j] = false
				continue
			}
			fr := Conformal{Method: method, Coverage: rule.Coverage, N: len(train), Threshold: min(max(train[r-1], 0), 1)}
			h := &hold[j]
			for _, p := range test {
				set := fr.Set(p.Dist)
				h.N++
				size[j] += len(set)
				switch len(set) {
				case 0:
					h.Empty++
				case 1:
					h.Singletons++
				}
				if slices.Contains(set, p.Expected) {
					h.Covered++
				}
			}
		}
	}
	for j := range out {
		if !ok[j] || hold[j].N == 0 {
			continue
		}
		h := hold[j]
		h.Coverage = ratio(h.Covered, h.N)
		h.MeanSize = float64(size[j]) / float64(h.N)
		out[j].Holdout = &h
	}
	return out, nil
}

// FitSets fits split conformal rules of method (ConformalLAC or
// ConformalAPS) at each coverage on preds, over the distributions the
// rules will be applied to (FitConformal), in the order of coverages,
// leaving out the coverages preds are too few for; nil when there are
// none, or for a method that is neither.
func FitSets(preds []Prediction, method string, coverages []float64) []Conformal {
	var out []Conformal
	for _, c := range coverages {
		if rule, err := FitConformal(preds, method, c); err == nil {
			out = append(out, rule)
		}
	}
	return out
}

// SetFor is the fit's prediction set rule for a request of the given
// coverage: of its sets, the one of the least coverage at or above it
// (LAC before APS at the same coverage), so that the guarantee holds
// for what was asked. It reports false when the fit has none that high:
// its outcomes were too few (ConformalMinCases).
func (f Fit) SetFor(coverage float64) (Conformal, bool) {
	best := -1
	for i, c := range f.Sets {
		if c.Check() != nil || c.Coverage < coverage-1e-9 {
			continue
		}
		if best < 0 || c.Coverage < f.Sets[best].Coverage ||
			(c.Coverage == f.Sets[best].Coverage && c.Method == ConformalLAC && f.Sets[best].Method != ConformalLAC) {
			best = i
		}
	}
	if best < 0 {
		return Conformal{}, false
	}
	return f.Sets[best], true
}

// MostSetOutcomes is the most calibration cases any of the fit's sets
// rests on, 0 when it has none: what a request its sets cannot serve is
// told the bucket had.
func (f Fit) MostSetOutcomes() int {
	n := 0
	for _, c := range f.Sets {
		n = max(n, c.N)
	}
	return n
}
