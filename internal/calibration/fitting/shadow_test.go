package fitting

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"system1/internal/decision"
)

// pairs makes n choice pairs over 3 options: the primary answers p, the
// candidate c, and the outcome is right(i), -1 for none; each pair is a
// request of its own.
func pairs(n int, p, c func(i int) decision.Distribution, right func(i int) int) []Pair {
	out := make([]Pair, n)
	for i := range n {
		out[i] = Pair{Kind: decision.Choice, Options: 3, Primary: p(i), Candidate: c(i), Expected: right(i), Request: fmt.Sprint("r", i)}
	}
	return out
}

func fixed(d ...float64) func(int) decision.Distribution {
	return func(int) decision.Distribution { return d }
}

func TestCompareRecommends(t *testing.T) {
	// The right answer is 0 in 3 cases of 4 and 1 otherwise.
	mostly0 := func(i int) int {
		if i%4 == 3 {
			return 1
		}
		return 0
	}
	none := func(int) int { return -1 }
	cases := []struct {
		name     string
		in       []Pair
		want     string
		evidence string
	}{
		{"too few pairs", pairs(MinComparePairs-1, fixed(0.6, 0.3, 0.1), fixed(0.1, 0.3, 0.6), mostly0), RecommendUndecided, "pairs compared"},
		{"the same answers, no outcomes", pairs(50, fixed(0.6, 0.3, 0.1), fixed(0.6, 0.3, 0.1), none), RecommendEquivalent, "answer alike"},
		{"other answers, no outcomes", pairs(50, fixed(0.6, 0.3, 0.1), fixed(0.1, 0.3, 0.6), none), RecommendKeep, "has not shown it is right"},
		{"worse on the outcomes", pairs(100, fixed(0.6, 0.3, 0.1), fixed(0.1, 0.3, 0.6), mostly0), RecommendKeep, "the candidate is worse"},
		{"better on the outcomes", pairs(100, fixed(0.1, 0.3, 0.6), fixed(0.6, 0.3, 0.1), mostly0), RecommendPromote, "the candidate is better"},
		{"over-confident, same answers", pairs(100, fixed(0.7, 0.2, 0.1), fixed(0.98, 0.01, 0.01), mostly0), RecommendKeep, "log-loss"},
		{"the same on the outcomes", pairs(100, fixed(0.6, 0.3, 0.1), fixed(0.6, 0.3, 0.1), mostly0), RecommendEquivalent, "no difference beyond the noise"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(tc.in)
			if c.Recommendation != tc.want || !strings.Contains(c.Evidence, tc.evidence) {
				t.Fatalf("%s: %s; want %s (%q)", c.Recommendation, c.Evidence, tc.want, tc.evidence)
			}
		})
	}
}

func TestCompareMeasures(t *testing.T) {
	in := []Pair{
		{Kind: decision.Choice, Options: 2, Primary: decision.Distribution{0.8, 0.2}, Candidate: decision.Distribution{0.6, 0.4}, Expected: 0, Request: "a"},
		{Kind: decision.Choice, Options: 2, Primary: decision.Distribution{0.7, 0.3}, Candidate: decision.Distribution{0.2, 0.8}, Expected: -1, Request: "b"},
		{Kind: decision.Noul, Options: 2, Primary: decision.Distribution{0.9, 0.1}, Candidate: decision.Distribution{0.9, 0.1}, Expected: 1, Request: "c"},
		{Kind: decision.Choice, Options: 2, Primary: decision.Distribution{0.5, 0.6}, Candidate: decision.Distribution{0.5, 0.5}, Expected: 0}, // not a distribution
	}
	c := Compare(in)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// |0.2|+|0.2| / 2, |0.5|+|0.5| / 2, 0: mean (0.2+0.5+0)/3.
	if c.N != 3 || c.Skipped != 1 || !near(c.Agreement, 2.0/3) || !near(c.MeanAbsChange, 0.7/3) ||
		!near(c.ConfidenceShift, ((0.6-0.8)+(0.8-0.7)+0)/3) || c.Labelled != 2 || c.LabelledRequests != 2 {
		t.Fatalf("%+v", c)
	}
	if c.PrimaryScore == nil || !near(c.PrimaryScore.Accuracy, 0.5) || !near(c.CandidateScore.Accuracy, 0.5) ||
		!near(c.NLLDiff, (-math.Log(0.6)+math.Log(0.8))/2) {
		t.Fatalf("%+v %+v %+v", c, *c.PrimaryScore, *c.CandidateScore)
	}
	if c.Recommendation != RecommendUndecided {
		t.Fatalf("3 pairs: %s", c.Recommendation)
	}
}

func TestMeasureDrift(t *testing.T) {
	answers := func(n int, conf func(i int) float64, top func(i int) int) []Answer {
		out := make([]Answer, n)
		for i := range n {
			out[i] = Answer{Confidence: conf(i), Top: top(i), Options: 4}
		}
		return out
	}
	spread := func(i int) float64 { return 0.4 + 0.05*float64(i%12) } // 0.40..0.95
	cycle := func(i int) int { return i % 4 }
	cases := []struct {
		name     string
		ref, cur []Answer
		alarm    bool
		reason   string
	}{
		{"the same answers", answers(200, spread, cycle), answers(200, spread, cycle), false, ""},
		{"confidences moved up", answers(200, spread, cycle), answers(200, func(int) float64 { return 0.97 }, cycle), true, "confidences moved"},
		{"top answers collapsed", answers(200, spread, cycle), answers(200, spread, func(int) int { return 0 }), true, "top answers moved"},
		{"too few to alarm", answers(200, spread, cycle), answers(MinDriftAnswers-1, func(int) float64 { return 0.97 }, cycle), false, ""},
		{"no reference", nil, answers(100, spread, cycle), false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := measureDrift(tc.ref, tc.cur, 0)
			if d.Alarm != tc.alarm || !strings.Contains(d.Reason, tc.reason) || d.Threshold != DefaultDriftThreshold {
				t.Fatalf("%+v", d)
			}
			if d.Reference != len(tc.ref) || d.Current != len(tc.cur) || math.IsNaN(d.PSI()) || math.IsInf(d.PSI(), 0) {
				t.Fatalf("%+v", d)
			}
		})
	}
	// With no change, the PSI is near what sampling alone gives: two
	// halves of one population do not alarm.
	all := answers(400, func(i int) float64 { return 0.3 + 0.7*math.Mod(float64(i)*0.618034, 1) }, func(i int) int { return (i * 7) % 4 })
	if d := measureDrift(all[:200], all[200:], 0); d.Alarm || !(d.ConfidencePSI < 3*d.Noise[0]) {
		t.Fatalf("two halves of one population: %+v", d)
	}
}

// Histograms kept by parts and merged measure the drift of the answers
// they count: the counts, PSIs and noise exactly, the means to rounding;
// answers of more options, or a top past them, widen the label bins as
// measureDrift does.
func TestMeasureDriftOfMergedHistograms(t *testing.T) {
	answers := func(n int, seed float64, options int) []Answer {
		out := make([]Answer, n)
		for i := range n {
			c := math.Mod(float64(i)*seed, 1)
			out[i] = Answer{Confidence: c, Top: (i * 7) % options, Options: options}
		}
		return out
	}
	cases := []struct {
		name     string
		ref, cur []Answer
	}{
		{"four options", answers(300, 0.618034, 4), answers(120, 0.414214, 4)},
		{"a top past the options", answers(50, 0.3, 3), append(answers(40, 0.7, 3), Answer{Confidence: 1, Top: 5, Options: 3})},
		{"no reference", nil, answers(60, 0.2, 2)},
		{"edges of the bins", []Answer{{0, 0, 2}, {0.1, 1, 2}, {0.9999999999, 0, 2}, {1, 1, 2}}, []Answer{{0.5, 0, 2}, {0.2, 1, 2}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := measureDrift(tc.ref, tc.cur, 0.3)
			// Each side counted in parts of 7 answers, then merged.
			parts := func(as []Answer) DriftHistogram {
				var all DriftHistogram
				for start := 0; start < len(as); start += 7 {
					var h DriftHistogram
					for _, a := range as[start:min(start+7, len(as))] {
						h.Add(a)
					}
					all.Merge(h)
				}
				return all
			}
			got := MeasureDriftOf(parts(tc.ref), parts(tc.cur), 0.3)
			for i := range got.MeanConfidence {
				if math.Abs(got.MeanConfidence[i]-want.MeanConfidence[i]) > 1e-12 {
					t.Fatalf("means %v, want %v", got.MeanConfidence, want.MeanConfidence)
				}
			}
			got.MeanConfidence, got.Reason, want.Reason = want.MeanConfidence, "", ""
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestPSI(t *testing.T) {
	if p := psi([]float64{10, 10}, []float64{10, 10}); p != 0 {
		t.Fatalf("identical histograms: %v", p)
	}
	// Shares 0.5/0.5 against 0.9/0.1 (before smoothing): PSI is
	// 0.4*ln(0.9/0.5) + 0.4*ln(0.5/0.1), about 0.879, a little less smoothed.
	p := psi([]float64{500, 500}, []float64{900, 100})
	if want := 0.4*math.Log(0.9/0.5) + 0.4*math.Log(0.5/0.1); !(p < want && p > want-0.01) {
		t.Fatalf("psi %v; want just under %v", p, want)
	}
	if p := psi([]float64{10, 0}, []float64{0, 10}); math.IsInf(p, 0) || math.IsNaN(p) || p <= 0 {
		t.Fatalf("disjoint histograms: %v", p)
	}
}

// measureDrift is MeasureDriftOf of histograms counting ref and cur.
func measureDrift(ref, cur []Answer, threshold float64) Drift {
	var r, c DriftHistogram
	for _, a := range ref {
		r.Add(a)
	}
	for _, a := range cur {
		c.Add(a)
	}
	return MeasureDriftOf(r, c, threshold)
}

// The homogeneity test is Pearson's: R's chisq.test(matrix(c(10, 20,
// 20, 10), 2), correct = FALSE) gives X-squared 6.6667, df 1, p-value
// 0.009823; bins expecting too few of the smaller window's answers are
// pooled, and one bin left compares nothing.
func TestHomogeneity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ref, cur []float64
		p        float64
	}{
		{"R's 2 by 2", []float64{10, 20}, []float64{20, 10}, 0.009823},
		{"the same shares", []float64{30, 60, 90}, []float64{10, 20, 30}, 1},
		// The first and third bins expect a third of an answer each of the
		// 30: both are pooled into the second, leaving (30, 11) against
		// (30, 19), X-squared 1.4335, df 1.
		{"rare bins pooled", []float64{1, 29, 0, 30}, []float64{0, 10, 1, 19}, 0.2312},
		{"one bin", []float64{40, 0}, []float64{30, 0}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p := homogeneity(tc.ref, tc.cur); math.Abs(p-tc.p) > 5e-4 {
				t.Errorf("p %v, want %v", p, tc.p)
			}
		})
	}
}

// An unchanged signature's drift alarms on its own scatter only at about
// DriftAlpha's rate, however few its answers; held to the PSI's
// threshold alone it alarmed in up to an eighth of its reports at 30
// answers. A large move still alarms at 30.
func TestDriftAlarmsBeyondSampling(t *testing.T) {
	const reports = 2000
	rng := rand.New(rand.NewPCG(3, 4))
	uniform := func(labels int) func() float64 {
		return func() float64 { return 1/float64(labels) + (1-1/float64(labels))*rng.Float64() }
	}
	confident := func() float64 { return 1 - 0.15*rng.Float64()*rng.Float64() }
	window := func(n, labels int, conf func() float64) DriftHistogram {
		var h DriftHistogram
		for range n {
			h.Add(Answer{Confidence: conf(), Top: rng.IntN(labels), Options: labels})
		}
		return h
	}
	for _, tc := range []struct {
		name                 string
		labels, ref, cur     int
		refConf, curConf     func() float64
		most, least, thresh0 int // alarms of reports: at most, at least; at least held to the threshold alone
	}{
		{"5 options, 30 against 30, unchanged", 5, 30, 30, uniform(5), uniform(5), 10, 0, 150},
		{"12 options, 60 against 60, unchanged", 12, 60, 60, uniform(12), uniform(12), 10, 0, 100},
		{"12 options, 30 against a day's 720, unchanged", 12, 720, 30, uniform(12), uniform(12), 10, 0, 40},
		{"77 options, 30 against 30, unchanged", 77, 30, 30, uniform(77), uniform(77), 10, 0, 100},
		{"5 options, 30 against a day's 720, confidences moved", 5, 720, 30, confident, uniform(5), reports, reports * 99 / 100, reports},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alarms, alone := 0, 0
			for range reports {
				ref, cur := window(tc.ref, tc.labels, tc.refConf), window(tc.cur, tc.labels, tc.curConf)
				d := MeasureDriftOf(ref, cur, 0)
				if d.Alarm {
					alarms++
				}
				if d.ConfidencePSI-d.Noise[0] >= d.Threshold || d.LabelPSI-d.Noise[1] >= d.Threshold {
					alone++
				}
			}
			t.Logf("%d of %d reports alarmed; %d held to the threshold alone", alarms, reports, alone)
			if alarms > tc.most || alarms < tc.least || alone < tc.thresh0 {
				t.Errorf("%d of %d reports alarmed (want %d to %d); %d held to the threshold alone (want at least %d)", alarms, reports, tc.least, tc.most, alone, tc.thresh0)
			}
		})
	}
}
