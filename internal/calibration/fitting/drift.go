package fitting

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mathext"

	"system1/internal/calibration"
)

// Label-free drift: whether a model's answers to one question signature
// have moved, without any outcome. Each window's answers are summarised
// by two histograms, of the confidence (DriftBins equal-width bins over
// [0, 1]) and of the top answer (one bin per option), and each pair of
// histograms is compared by the population stability index
//
//	PSI = sum_i (c_i - r_i) * ln(c_i / r_i)
//
// over the bins' shares r (the reference window) and c (the current
// one), each share smoothed as (count + 0.5) / (n + 0.5 * bins) so that
// an empty bin costs a finite amount. The usual reading is below 0.1 no
// shift, 0.1 to 0.25 a moderate one, above 0.25 a large one.
//
// Sampling alone gives a PSI above 0: with no change, n*PSI is close to a
// chi-square with bins-1 degrees of freedom, where 1/n = 1/n_r + 1/n_c,
// so its expectation is (bins-1) * (1/n_r + 1/n_c). A Drift reports that
// expectation as Noise and alarms when a PSI less its noise reaches the
// threshold and the two histograms differ by a test at DriftAlpha, so
// that a quiet signature with few answers does not alarm on its own
// scatter: the mean alone left a wide spread, and with 30 to 60 answers
// an unchanged signature alarmed in up to a seventh of its reports.

// DriftBins is the number of confidence bins of a drift histogram.
const DriftBins = 10

// DefaultDriftThreshold is the PSI, less its sampling noise, at which a
// signature's drift alarms: the conventional "large shift".
const DefaultDriftThreshold = 0.25

// MinDriftAnswers is the least answers each window must hold for a
// signature's drift to alarm.
const MinDriftAnswers = 30

// DriftAlpha is the level of the test a statistic's histograms must fail
// besides the PSI's threshold to alarm: Pearson's chi-square test that
// both windows draw from one distribution (homogeneity), about the
// chance that an unchanged signature's statistic alarms in a report.
const DriftAlpha = 1e-3

// driftMinExpected is the fewest answers of the smaller window each bin
// of the homogeneity test must expect: bins expecting fewer are pooled.
// At 5, the textbook rule, a window of 30 answers against a day's
// reference kept too few bins to see a large move; at 2, unchanged
// signatures of 30 to 100 answers alarmed in at most 0.25% of reports
// (docs/shadow.md).
const driftMinExpected = 2

// Answer is one answer as drift reads it: its confidence
// (Prediction.Confidence) and predicted option (Prediction.Predicted),
// of a question with Options options.
type Answer struct {
	Confidence float64
	Top        int
	Options    int
}

// AnswerOf reads a distribution over options as drift does; ok is false
// when the distribution does not fit them (Prediction.Check).
func AnswerOf(p calibration.Prediction) (a Answer, ok bool) {
	p.Expected = 0
	if p.Check() != nil {
		return Answer{}, false
	}
	return Answer{Confidence: p.Confidence(), Top: p.Predicted(), Options: p.Options}, true
}

// Drift compares one signature's answers in a current window with those
// of a reference window.
type Drift struct {
	// Reference and Current are the answers in each window.
	Reference int `json:"reference"`
	Current   int `json:"current"`
	// ConfidencePSI and LabelPSI compare the histograms of the
	// confidence and of the top answer.
	ConfidencePSI float64 `json:"confidence_psi"`
	LabelPSI      float64 `json:"label_psi"`
	// MeanConfidence is each window's mean confidence, reference first.
	MeanConfidence [2]float64 `json:"mean_confidence"`
	// Noise is the PSI sampling alone gives on average, per statistic:
	// confidence first, then label.
	Noise [2]float64 `json:"noise"`
	// PValue is each statistic's homogeneity test (DriftAlpha): the
	// chance that sampling alone sets the two windows' histograms as far
	// apart; 1 where too few answers leave two bins to compare.
	PValue [2]float64 `json:"p_value"`
	// Threshold is the PSI over the noise that alarms.
	Threshold float64 `json:"threshold"`
	// Alarm is set when both windows hold at least MinDriftAnswers and a
	// PSI less its noise reaches the threshold, its test's p-value under
	// DriftAlpha; Reason says which.
	Alarm  bool   `json:"alarm"`
	Reason string `json:"reason,omitempty"`
}

// PSI is the largest of the two statistics.
func (d Drift) PSI() float64 { return math.Max(d.ConfidencePSI, d.LabelPSI) }

// DriftHistogram is a window's answers as drift compares them: the
// counts of their confidence bins and top answers, and the sum of their
// confidences. Histograms of the same bins add up (Merge), so a window's
// can be kept by parts; the zero value is empty.
type DriftHistogram struct {
	// N is the number of answers, Sum the sum of their confidences.
	N   int
	Sum float64
	// Confidence counts the answers of each of the DriftBins confidence
	// bins; Top those of each top answer, as long as the largest seen.
	Confidence [DriftBins]int
	Top        []int
	// Labels is the most options an answer had, or its top answer's
	// index plus one where larger.
	Labels int
}

// Add counts one answer.
func (h *DriftHistogram) Add(a Answer) {
	h.N++
	h.Sum += a.Confidence
	h.Confidence[bin(a.Confidence, DriftBins)]++
	top := max(a.Top, 0)
	h.Top = grow(h.Top, top+1)
	h.Top[top]++
	h.Labels = max(h.Labels, a.Options, a.Top+1)
}

// Merge adds o's answers to h.
func (h *DriftHistogram) Merge(o DriftHistogram) {
	h.N += o.N
	h.Sum += o.Sum
	addTo(h.Confidence[:], o.Confidence[:])
	h.Top = grow(h.Top, len(o.Top))
	addTo(h.Top, o.Top)
	h.Labels = max(h.Labels, o.Labels)
}

// MeasureDriftOf compares the current answers the histogram cur counts
// with the reference ref counts, alarming at threshold (0 or less:
// DefaultDriftThreshold). The answers are of one signature, so of one
// option count; the label histogram has as many bins as the most options
// either holds.
func MeasureDriftOf(ref, cur DriftHistogram, threshold float64) Drift {
	if !(threshold > 0) {
		threshold = DefaultDriftThreshold
	}
	d := Drift{Reference: ref.N, Current: cur.N, Threshold: threshold}
	labels := max(2, ref.Labels, cur.Labels)
	hist := func(h DriftHistogram) (conf, top []float64, mean float64) {
		conf, top = make([]float64, DriftBins), make([]float64, labels)
		for i, n := range h.Confidence {
			conf[i] = float64(n)
		}
		for i, n := range h.Top {
			top[min(i, labels-1)] += float64(n)
		}
		if h.N > 0 {
			mean = h.Sum / float64(h.N)
		}
		return conf, top, mean
	}
	rc, rt, rm := hist(ref)
	cc, ct, cm := hist(cur)
	d.MeanConfidence = [2]float64{rm, cm}
	d.PValue = [2]float64{1, 1}
	if ref.N == 0 || cur.N == 0 {
		return d
	}
	d.ConfidencePSI, d.LabelPSI = psi(rc, cc), psi(rt, ct)
	inv := 1/float64(ref.N) + 1/float64(cur.N)
	d.Noise = [2]float64{float64(DriftBins-1) * inv, float64(labels-1) * inv}
	d.PValue = [2]float64{homogeneity(rc, cc), homogeneity(rt, ct)}
	if ref.N < MinDriftAnswers || cur.N < MinDriftAnswers {
		return d
	}
	switch {
	case d.ConfidencePSI-d.Noise[0] >= threshold && d.PValue[0] < DriftAlpha:
		d.Alarm = true
		d.Reason = fmt.Sprintf("the confidences moved: PSI %.3f (noise %.3f, p %.2g) from a mean of %.3f to %.3f", d.ConfidencePSI, d.Noise[0], d.PValue[0], rm, cm)
	case d.LabelPSI-d.Noise[1] >= threshold && d.PValue[1] < DriftAlpha:
		d.Alarm = true
		d.Reason = fmt.Sprintf("the top answers moved: PSI %.3f (noise %.3f, p %.2g)", d.LabelPSI, d.Noise[1], d.PValue[1])
	}
	return d
}

// homogeneity is the p-value of Pearson's chi-square test that ref and
// cur, counts over the same bins, draw from one distribution: the bins
// pooled, the least answered first, until each expects driftMinExpected
// of the smaller window's answers; 1 where fewer than two bins are left.
// The pooling reads both windows' counts together, never how they split
// between the windows, so the test keeps its level.
func homogeneity(ref, cur []float64) float64 {
	type bin struct{ r, c float64 }
	var bins []bin
	var nr, nc float64
	for i := range ref {
		nr, nc = nr+ref[i], nc+cur[i]
		if ref[i]+cur[i] > 0 {
			bins = append(bins, bin{ref[i], cur[i]})
		}
	}
	n := nr + nc
	least := func(a, b bin) int { return cmp.Compare(a.r+a.c, b.r+b.c) }
	slices.SortFunc(bins, least)
	for len(bins) > 1 && (bins[0].r+bins[0].c)/n*min(nr, nc) < driftMinExpected {
		bins[1].r, bins[1].c = bins[1].r+bins[0].r, bins[1].c+bins[0].c
		bins = bins[1:]
		slices.SortFunc(bins, least)
	}
	if len(bins) < 2 {
		return 1
	}
	var x2 float64
	for _, b := range bins {
		er, ec := (b.r+b.c)*nr/n, (b.r+b.c)*nc/n
		x2 += (b.r-er)*(b.r-er)/er + (b.c-ec)*(b.c-ec)/ec
	}
	return mathext.GammaIncRegComp(float64(len(bins)-1)/2, x2/2) // the chi-square's upper tail
}

// psi is the population stability index of two histograms of counts
// over the same bins, smoothed as the package's drift section says.
func psi(ref, cur []float64) float64 {
	var nr, nc float64
	for i := range ref {
		nr += ref[i]
		nc += cur[i]
	}
	b := float64(len(ref))
	var s float64
	for i := range ref {
		r := (ref[i] + 0.5) / (nr + 0.5*b)
		c := (cur[i] + 0.5) / (nc + 0.5*b)
		s += (c - r) * math.Log(c/r)
	}
	return s
}
