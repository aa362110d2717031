package fitting

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// GateBins is the number of equal-width confidence bins Stats keeps for
// gates: a gate suggested from Stats is one of their lower edges, a
// multiple of 0.001.
const GateBins = 1000

// Stats are the sufficient statistics of Measure and of a gate over a
// set of cases: counts and sums that Add updates one case at a time and
// Merge adds together, so that a report over a million outcomes reads a
// few numbers per bucket instead of decoding a million distributions.
// The zero value is empty and ready. Stats marshals to JSON, to be kept
// beside the cases.
type Stats struct {
	// N counts the cases added, Skipped those left out because they fail
	// Prediction.Check.
	N       int `json:"n"`
	Skipped int `json:"skipped"`
	// Right counts the cases answered right.
	Right int `json:"right"`
	// NLL, Brier and AbsErr are the sums over the cases of Measure's
	// terms; AbsErr over the Scores score cases only.
	NLL    float64 `json:"nll"`
	Brier  float64 `json:"brier"`
	Scores int     `json:"scores"`
	AbsErr float64 `json:"abs_err"`
	// Bins are Measure's NumBins confidence bins: count, right and the
	// sum of confidences of each.
	BinCount []int     `json:"bin_count"`
	BinRight []int     `json:"bin_right"`
	BinConf  []float64 `json:"bin_conf"`
	// SelN and SelRight count the cases at or above each selective
	// threshold of Metrics.Selective (0.7, 0.9), and those right.
	SelN     []int `json:"sel_n"`
	SelRight []int `json:"sel_right"`
	// Expected counts the cases by expected index, for the
	// majority-class floor.
	Expected []int `json:"expected"`
	// GateN and GateWrong count the cases, and the wrong ones, in each of
	// GateBins confidence bins, for SuggestGate.
	GateN     []int `json:"gate_n"`
	GateWrong []int `json:"gate_wrong"`
}

func (s *Stats) init() {
	if s.BinCount != nil {
		return
	}
	s.BinCount, s.BinRight, s.BinConf = make([]int, NumBins), make([]int, NumBins), make([]float64, NumBins)
	s.SelN, s.SelRight = make([]int, len(selectiveThresholds())), make([]int, len(selectiveThresholds()))
	s.GateN, s.GateWrong = make([]int, GateBins), make([]int, GateBins)
}

// Add counts one case: into Skipped when it fails Prediction.Check.
// Statistics not of the shape Add gives (read back broken) start over.
func (s *Stats) Add(p calibration.Prediction) {
	if s.check() != nil {
		*s = Stats{}
	}
	s.init()
	s.count(p)
}

// count adds p, or counts it in Skipped when it fails Prediction.Check,
// to s, which has Add's shape.
func (s *Stats) count(p calibration.Prediction) {
	if p.Check() != nil {
		s.Skipped++
		return
	}
	s.add(p, 1)
}

// add adds p, which passes Prediction.Check, to every statistic, or takes
// it out again for a sign of -1.
func (s *Stats) add(p calibration.Prediction, sign int) {
	d := float64(sign)
	c, ok := p.Confidence(), p.Correct()
	b, g := bin(c, NumBins), bin(c, GateBins)
	s.N += sign
	s.BinCount[b] += sign
	s.BinConf[b] += d * c
	s.GateN[g] += sign
	if ok {
		s.Right += sign
		s.BinRight[b] += sign
	} else {
		s.GateWrong[g] += sign
	}
	for i, t := range selectiveThresholds() {
		if c >= t.t-calibration.Edge {
			s.SelN[i] += sign
			if ok {
				s.SelRight[i] += sign
			}
		}
	}
	for i, q := range p.Dist {
		y := boolf(i == p.Expected)
		s.Brier += d * (q - y) * (q - y)
	}
	s.NLL += d * caseNLL(p)
	if p.Kind == decision.Score {
		s.Scores += sign
		s.AbsErr += d * levelErr(p)
	}
	s.Expected = grow(s.Expected, p.Expected+1)
	s.Expected[p.Expected] += sign
}

// Remove takes back one case Add counted: the same p, so that an
// outcome corrected later (the latest wins) or a record pruned from the
// log leaves the statistics of the cases that remain. A case that fails
// Prediction.Check takes one from Skipped. Sums lose what they gained,
// to rounding. Removing what was never added, or from statistics of
// another shape, does nothing.
func (s *Stats) Remove(p calibration.Prediction) {
	if s.check() != nil {
		return
	}
	if p.Check() != nil {
		if s.Skipped > 0 {
			s.Skipped--
		}
		return
	}
	c, ok := p.Confidence(), p.Correct()
	b, g := bin(c, NumBins), bin(c, GateBins)
	if s.N == 0 || s.BinCount[b] == 0 || s.GateN[g] == 0 || p.Expected >= len(s.Expected) || s.Expected[p.Expected] == 0 ||
		(ok && (s.Right == 0 || s.BinRight[b] == 0)) || (!ok && s.GateWrong[g] == 0) || (p.Kind == decision.Score && s.Scores == 0) {
		return // not a case of these statistics; without bins, check leaves N at 0
	}
	s.add(p, -1)
	if s.N == 0 {
		// Nothing left: no rounding is left behind either.
		*s = Stats{Skipped: s.Skipped}
		return
	}
	// Rounding must not leave a sum of non-negative terms below zero.
	s.Brier, s.NLL, s.AbsErr = math.Max(s.Brier, 0), math.Max(s.NLL, 0), math.Max(s.AbsErr, 0)
	if s.BinCount[b] == 0 {
		s.BinConf[b] = 0
	}
}

// Merge adds o's counts to s: the statistics of both sets of cases.
// Either not of the shape Add gives (read back broken) is an error, and
// s is left as it was.
func (s *Stats) Merge(o Stats) error {
	if err := o.check(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("merge into: %w", err)
	}
	s.init()
	if o.BinCount == nil {
		s.Skipped += o.Skipped
		return nil
	}
	s.N += o.N
	s.Skipped += o.Skipped
	s.Right += o.Right
	s.NLL += o.NLL
	s.Brier += o.Brier
	s.Scores += o.Scores
	s.AbsErr += o.AbsErr
	addTo(s.BinCount, o.BinCount)
	addTo(s.BinRight, o.BinRight)
	addTo(s.BinConf, o.BinConf)
	addTo(s.SelN, o.SelN)
	addTo(s.SelRight, o.SelRight)
	addTo(s.GateN, o.GateN)
	addTo(s.GateWrong, o.GateWrong)
	s.Expected = grow(s.Expected, len(o.Expected))
	addTo(s.Expected, o.Expected)
	return nil
}

// grow is counts extended with zeros to at least n long.
func grow(counts []int, n int) []int { return append(counts, make([]int, max(n-len(counts), 0))...) }

// addTo adds src to dst, element by element.
func addTo[T int | float64](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

// check reports whether s has the shape Add gives, so that Merge and
// Metrics can trust its lengths: Stats read back from JSON may not.
func (s Stats) check() error {
	if s.BinCount == nil {
		if s.N != 0 || s.Right != 0 {
			return errors.New("counts without bins")
		}
		return nil
	}
	switch {
	case len(s.BinCount) != NumBins || len(s.BinRight) != NumBins || len(s.BinConf) != NumBins:
		return fmt.Errorf("%d bins, not %d", len(s.BinCount), NumBins)
	case len(s.SelN) != len(selectiveThresholds()) || len(s.SelRight) != len(s.SelN):
		return fmt.Errorf("%d selective thresholds, not %d", len(s.SelN), len(selectiveThresholds()))
	case len(s.GateN) != GateBins || len(s.GateWrong) != GateBins:
		return fmt.Errorf("%d gate bins, not %d", len(s.GateN), GateBins)
	case len(s.Expected) > 256:
		return fmt.Errorf("%d expected indices", len(s.Expected))
	case s.N > 0 && len(s.Expected) == 0:
		return fmt.Errorf("%d cases without expected indices", s.N)
	case s.N < 0 || s.Skipped < 0 || s.Right < 0 || s.Right > s.N || s.Scores < 0 || s.Scores > s.N:
		return fmt.Errorf("counts n %d, right %d, scores %d do not nest", s.N, s.Right, s.Scores)
	}
	for _, v := range []float64{s.NLL, s.Brier, s.AbsErr} {
		if !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("a sum is %v", v)
		}
	}
	return nil
}

// Metrics are the metrics Measure gives over the cases added: the same
// numbers, to the last bit when the cases were added in Measure's order,
// and to rounding after a Merge. Stats that are not of the shape Add
// gives (read back broken) measure as empty.
func (s Stats) Metrics() Metrics {
	if s.check() != nil || s.BinCount == nil {
		s = Stats{Skipped: s.Skipped}
		s.init()
	}
	return s.metrics()
}

// metrics is Metrics of s, which has Add's shape.
func (s Stats) metrics() Metrics {
	m := Metrics{Bins: make([]Bin, NumBins), Selective: map[string]Selective{}, Skipped: s.Skipped}
	for i := range m.Bins {
		b := &m.Bins[i]
		b.Lo, b.Hi = float64(i)/NumBins, float64(i+1)/NumBins
		if s.BinCount[i] > 0 {
			b.Count = s.BinCount[i]
			b.Accuracy = float64(s.BinRight[i]) / float64(b.Count)
			b.Confidence = s.BinConf[i] / float64(b.Count)
			m.ECE += float64(b.Count) * math.Abs(b.Accuracy-b.Confidence)
		}
	}
	for i, t := range selectiveThresholds() {
		out := Selective{Threshold: t.t, N: s.SelN[i], Coverage: ratio(s.SelN[i], s.N)}
		if s.SelN[i] > 0 {
			out.Accuracy = new(ratio(s.SelRight[i], s.SelN[i]))
		}
		m.Selective[t.key] = out
	}
	if s.N == 0 {
		m.ECE = 0
		return m
	}
	m.N = s.N
	if s.Scores > 0 {
		m.MAE = new(s.AbsErr / float64(s.Scores))
	}
	n := float64(s.N)
	m.Accuracy = ratio(s.Right, s.N)
	m.ECE /= n
	m.Brier = s.Brier / n
	m.NLL = s.NLL / n
	m.Floor = ratio(slices.Max(s.Expected), s.N)
	return m
}

// SuggestGate is SuggestGate over the cases added, with the candidate
// thresholds the lower edges of the gate bins that hold a case instead of
// the confidences seen: a case is at or above an edge exactly when its bin
// is, so each candidate's counts are exact. The gate is the lowest such edge
// that passes the bound; it can differ from the one found on the cases
// themselves, which may pass at a confidence between two edges. The
// first bin's edge, 0, is no candidate: a gate at 0 gates nothing, and
// SuggestGate's stops above it too.
func (s Stats) SuggestGate(target float64) Gate {
	var steps []gateStep
	if s.check() == nil && s.BinCount != nil {
		for i := GateBins - 1; i > 0; i-- {
			if s.GateN[i] > 0 {
				steps = append(steps, gateStep{float64(i) / GateBins, s.GateN[i], s.GateWrong[i]})
			}
		}
	}
	return lowestGate(target, s.N, steps)
}

// BucketStats are one bucket's statistics as outcomes arrive: raw (the
// cases as the engine answered, before calibration) and calibrated by
// the bucket's current fit, Calibrator. When the fit changes the
// calibrated statistics no longer hold.
type BucketStats struct {
	Calibrator calibration.Calibrator `json:"calibrator"`
	Raw        Stats                  `json:"raw"`
	Calibrated Stats                  `json:"calibrated"`
}

// Report is the bucket's report from its statistics alone, as Measure
// and SuggestGate would give it from the cases, but for the gate, chosen
// among the gate bins' edges (Stats.SuggestGate).
func (b BucketStats) Report(model string, kind decision.Kind, bucket string, target float64) BucketReport {
	return bucketReport(model, kind, bucket, b.Calibrator, b.Raw.Metrics(), b.Calibrated.Metrics(), b.Calibrated.SuggestGate(target))
}

// RefitState is the bookkeeping of when a bucket is due a refit: it
// counts the outcomes seen and those at the last refit, so that a bucket
// is refitted only when MinOutcomes new ones have come since, whether the
// last refit adopted anything or not (a bucket refused a fit would
// otherwise be refitted, and refused, on every tick).
type RefitState struct {
	// Outcomes is the number of outcomes seen, AtLastRefit the number
	// there were at the last refit.
	Outcomes    int `json:"outcomes"`
	AtLastRefit int `json:"at_last_refit"`
}

// Observe counts n new outcomes (a negative n counts none).
func (r *RefitState) Observe(n int) {
	if n > 0 {
		r.Outcomes += n
	}
}

// New is the number of outcomes since the last refit.
func (r RefitState) New() int { return max(r.Outcomes-r.AtLastRefit, 0) }

// Due reports whether at least minOutcomes (at least 1) outcomes have
// come since the last refit.
func (r RefitState) Due(minOutcomes int) bool { return r.New() >= max(minOutcomes, 1) }
