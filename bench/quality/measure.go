package main

import (
	"math"
	"math/rand/v2"
	"slices"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
)

// slackLevel is the probability with which the empirical coverage of a
// later part may fall below the requested level minus the slack.
const slackLevel = 0.05

// row is one set of distributions measured on the later parts.
type row struct {
	fitting.Metrics
	// Gates are each loop's confidence gate (nil where none was
	// suggested), GateFrom where they came from ("server": GET
	// /v1/calibration after the refit; "first part":
	// fitting.SuggestGate on the first part); Selective is how the
	// later parts fared at or above their loop's gate.
	Gates     []*float64        `json:"gates"`
	GateFrom  string            `json:"gate_from"`
	Selective fitting.Selective `json:"selective_at_gate"`
	// Sets are the split conformal sets each loop fitted on its first
	// part, measured on its later part, pooled, per method and coverage.
	Sets []conformal `json:"sets"`
}

// conformal is one method and coverage of prediction sets over the loops.
type conformal struct {
	Method   string  `json:"method"`
	Coverage float64 `json:"coverage"`
	// Thresholds are each loop's.
	Thresholds []float64               `json:"thresholds"`
	Later      calibration.SetCoverage `json:"later"`
	// Err is why a loop fitted no rule (too few cases), else empty.
	Err string `json:"error,omitempty"`
	// Server counts the loops whose rule is the server's own (its fit's
	// set at this coverage), the others' fitted here on the first part.
	Server int `json:"server"`
}

// fold is one loop's labelled cases, with its gate, and the fit its
// server adopted (nil for none, and for the raw row), whose LAC set
// rules the server serves.
type fold struct {
	first, later []calibration.Prediction
	gate         *float64
	fit          *calibration.Fit
	// raw is later before the fit's calibrator, which prediction sets
	// are of (nil: later is).
	raw []calibration.Prediction
}

// measureRow measures the later parts of folds together, each at its
// gate and with prediction sets fitted on its first part.
func measureRow(folds []fold, from string) row {
	var later []calibration.Prediction
	var sel selCount
	r := row{GateFrom: from}
	for _, f := range folds {
		later = append(later, f.later...)
		r.Gates = append(r.Gates, f.gate)
		sel.add(f.later, f.gate)
	}
	r.Metrics = fitting.Measure(later)
	r.Bins = nil // the JSON keeps the numbers of the table, not the diagram
	r.Selective = sel.selective()
	for _, method := range []string{calibration.ConformalLAC, calibration.ConformalAPS} {
		for _, c := range coverages {
			s := conformal{Method: method, Coverage: c}
			var count calibration.SetCount
			for _, f := range folds {
				// The server's own rule where it has one (LAC, fitted on
				// the first part's outcomes before its calibrator, and
				// applied to the later answers before it); else one
				// fitted here the same way.
				rule, ok := calibration.Conformal{}, false
				if f.fit != nil && method == calibration.ConformalLAC {
					rule, ok = f.fit.SetFor(c)
					ok = ok && rule.Method == method && rule.Coverage == c
				}
				if ok {
					s.Server++
				} else {
					var err error
					if rule, err = fitting.FitConformal(f.first, method, c); err != nil {
						s.Err = err.Error()
						break
					}
				}
				s.Thresholds = append(s.Thresholds, rule.Threshold)
				later := f.later
				if f.raw != nil {
					later = f.raw // of the answers before the calibrator, as the server's sets are
				}
				count.AddSets(rule, later)
			}
			if s.Err == "" {
				s.Later = count.Coverage()
			}
			r.Sets = append(r.Sets, s)
		}
	}
	return r
}

// selCount counts the answers at or above their loop's gate, and those
// right, of total answers.
type selCount struct{ above, right, total int }

// add counts the cases whose confidence reaches the gate (within 1e-9,
// as in package calibration); a nil gate lets none through.
func (s *selCount) add(preds []calibration.Prediction, gate *float64) {
	for _, p := range preds {
		if p.Check() != nil {
			continue
		}
		s.total++
		if gate != nil && p.Confidence() >= *gate-1e-9 {
			s.above++
			if p.Correct() {
				s.right++
			}
		}
	}
}

// selective is the accuracy and coverage of the answers let through;
// the threshold is left 0, since each loop has its own.
func (s selCount) selective() fitting.Selective {
	out := fitting.Selective{N: s.above}
	if s.total > 0 {
		out.Coverage = float64(s.above) / float64(s.total)
	}
	if s.above > 0 {
		out.Accuracy = new(float64(s.right) / float64(s.above))
	}
	return out
}

// bounds are what the simulated model allows on the later part, whatever
// the loop does.
type bounds struct {
	// OracleT is the later part tempered by the temperature fitted
	// (least NLL) on the later part itself; OracleVector likewise with
	// vector scaling: in-sample, so better than any fit made on other
	// cases can expect.
	OracleT      float64                `json:"oracle_temperature"`
	OracleTRow   fitting.Metrics        `json:"oracle_temperature_metrics"`
	OracleVector calibration.Calibrator `json:"oracle_vector"`
	OracleVecRow fitting.Metrics        `json:"oracle_vector_metrics"`
	// BestECET is the temperature of least ECE on the later part, among
	// bestECEGrid over FitTemperature's range, and BestECE that ECE.
	BestECET float64 `json:"best_ece_temperature"`
	BestECE  float64 `json:"best_ece"`
	// FloorMean and FloorP95 are the ECE a perfectly calibrated model
	// shows on as many answers at the first run's calibrated
	// confidences: outcomes drawn right with probability the
	// confidence, floorDraws times.
	FloorMean float64 `json:"ece_floor_mean"`
	FloorP95  float64 `json:"ece_floor_p95"`
}

// bestECEGrid is how many temperatures BestECE is the least over.
const bestECEGrid = 301

// floorDraws is how many outcome draws the ECE floor is averaged over.
const floorDraws = 400

// measureBounds measures the bounds on r's raw later parts, and the ECE
// floor at their confidences as r's loops calibrated them.
func measureBounds(r run, seed uint64) bounds {
	var b bounds
	var laterRaw []calibration.Prediction
	var conf []float64 // the later answers' confidences as their loops calibrated them
	for _, l := range r.Folds {
		cal := predictions(l.later, rawDist)
		laterRaw = append(laterRaw, cal...)
		if l.Fit != nil {
			cal = calibration.Calibrate(cal, l.Fit.Calibrator())
		}
		for _, p := range cal {
			if p.Check() == nil {
				conf = append(conf, p.Confidence())
			}
		}
	}
	if t, err := fitting.FitTemperature(laterRaw); err == nil {
		b.OracleT, b.OracleTRow = t, fitting.Measure(fitting.Temper(laterRaw, t))
		b.OracleTRow.Bins = nil
	}
	if c, err := fitting.FitVector(laterRaw); err == nil {
		b.OracleVector, b.OracleVecRow = c, fitting.Measure(calibration.Calibrate(laterRaw, c))
		b.OracleVecRow.Bins = nil
	}
	b.BestECE = math.Inf(1)
	lo, hi := math.Log(fitting.MinTemperature), math.Log(fitting.MaxTemperature)
	for i := range bestECEGrid { // FitTemperature's range, log-spaced
		t := math.Exp(lo + (hi-lo)*float64(i)/(bestECEGrid-1))
		if e := fitting.Measure(fitting.Temper(laterRaw, t)).ECE; e < b.BestECE {
			b.BestECE, b.BestECET = e, t
		}
	}
	b.FloorMean, b.FloorP95 = eceFloor(conf, floorDraws, seed)
	return b
}

// eceFloor is the ECE (fitting.TopECE) of answers whose
// confidences are conf and which are right with exactly that
// probability: its mean and 95th percentile over draws draws of the
// outcomes. It is what sampling alone adds to the ECE of a perfectly
// calibrated model on that many answers.
func eceFloor(conf []float64, draws int, seed uint64) (mean, p95 float64) {
	if len(conf) == 0 || draws <= 0 {
		return 0, 0
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	eces := make([]float64, draws)
	right := make([]bool, len(conf))
	for d := range eces {
		for i, c := range conf {
			right[i] = rng.Float64() < c
		}
		eces[d] = fitting.TopECE(conf, right)
		mean += eces[d]
	}
	slices.Sort(eces)
	return mean / float64(draws), eces[int(math.Ceil(0.95*float64(draws)))-1]
}

// coverageSlack is the finite-sample slack of split conformal coverage:
// with n calibration cases and m test cases, exchangeable and with
// distinct scores, the share of the m sets that cover is at least
// coverage - slack with probability at least 1 - level. Given the
// calibration cases the coverage of a new set is Beta(k, n+1-k)
// distributed, k = ceil((n+1) coverage) (Vovk 2012; Angelopoulos and
// Bates 2021, section 3.2), so the number of the m sets that cover is
// beta-binomial(m, k, n+1-k); the slack is coverage less its level-
// quantile over m. Ties among scores (two-decimal answers) only raise the
// coverage. Too few cases for the coverage gives 0.
func coverageSlack(n, m int, coverage, level float64) float64 {
	k := int(math.Ceil(float64(n+1)*coverage - 1e-9))
	if n < 1 || m < 1 || k < 1 || k > n {
		return 0
	}
	q := betaBinomialQuantile(m, float64(k), float64(n+1-k), level)
	return coverage - float64(q)/float64(m)
}

// betaBinomialQuantile is the least x in 0..m with P(X <= x) >= p for X
// beta-binomial(m, a, b), a and b positive.
func betaBinomialQuantile(m int, a, b, p float64) int {
	lbeta := func(x, y float64) float64 {
		lx, _ := math.Lgamma(x)
		ly, _ := math.Lgamma(y)
		lxy, _ := math.Lgamma(x + y)
		return lx + ly - lxy
	}
	lchoose := func(n, k int) float64 {
		ln, _ := math.Lgamma(float64(n + 1))
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		return ln - lk - lnk
	}
	base := lbeta(a, b)
	var cum float64
	for x := 0; x <= m; x++ {
		cum += math.Exp(lchoose(m, x) + lbeta(float64(x)+a, float64(m-x)+b) - base)
		if cum >= p {
			return x
		}
	}
	return m
}

// slackDraws is how many draws the simulated slack is taken over.
const slackDraws = 4000

// setSlack is the slack of the pooled conformal coverage at coverage for
// loops whose first and later parts have these sizes: coverageSlack's
// for one loop; for folds >= 2, whose parts are folds of one traffic
// (each later part one fold, its first part the others), poolSlack's.
func setSlack(first, later []int, folds int, coverage float64, seed uint64) float64 {
	if folds <= 1 || len(later) < 2 {
		return coverageSlack(first[0], later[0], coverage, slackLevel)
	}
	var runs []simRun
	n := 0
	for _, m := range later {
		n += m
	}
	at := 0
	for _, m := range later {
		var r simRun
		for i := range n {
			if i >= at && i < at+m {
				r.later = append(r.later, i)
			} else {
				r.first = append(r.first, i)
			}
		}
		runs = append(runs, r)
		at += m
	}
	return poolSlack(n, runs, coverage, slackLevel, slackDraws, seed)
}

// simRun is one loop of a simulated pool: the indices of its first
// (calibration) and later (test) cases among all of them.
type simRun struct{ first, later []int }

// poolSlack is the slack of the pooled coverage of split conformal sets
// over runs at coverage, by simulation: the coverage of such sets
// depends on the cases only through the ranks of their scores, which for
// exchangeable cases with distinct scores are a uniformly random
// permutation. Each of draws draws one, fits each run's threshold on its
// first cases (the ceil((n+1) coverage)-th smallest score) and counts its
// later cases at or under it; the slack is coverage less the level-
// quantile of the pooled share covered. Ties (two-decimal answers) only
// raise the coverage.
func poolSlack(n int, runs []simRun, coverage, level float64, draws int, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 0x51ac))
	total := 0
	for _, r := range runs {
		total += len(r.later)
	}
	covered := make([]int, draws)
	var scores []int
	for d := range draws {
		rank := rng.Perm(n)
		for _, r := range runs {
			scores = scores[:0]
			for _, i := range r.first {
				scores = append(scores, rank[i])
			}
			slices.Sort(scores)
			k := int(math.Ceil(float64(len(scores)+1)*coverage - 1e-9))
			if k > len(scores) {
				covered[d] += len(r.later) // only the set of every option covers
				continue
			}
			t := scores[k-1]
			for _, i := range r.later {
				if rank[i] <= t {
					covered[d]++
				}
			}
		}
	}
	slices.Sort(covered)
	q := covered[max(int(math.Ceil(level*float64(draws)))-1, 0)]
	return coverage - float64(q)/float64(total)
}
