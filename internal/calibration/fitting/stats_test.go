package fitting

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// mixed is a set of every kind, with cases Check refuses among them.
func mixed() []calibration.Prediction {
	preds := overconfident(400, 4, 1.5, 3)
	preds = append(preds, nouls(300, 1.5, 4)...)
	preds = append(preds, sst5Like(300, 0.5, 5)...)
	preds = append(preds,
		calibration.Prediction{Kind: decision.Choice, Dist: decision.Distribution{math.NaN(), 1}, Options: 2},
		calibration.Prediction{Kind: "rank", Dist: decision.Distribution{.5, .5}, Options: 2},
	)
	return preds
}

// Statistics added case by case give Measure's metrics exactly; merged
// from parts, to rounding; read back from JSON, the same.
func TestStatsMatchMeasure(t *testing.T) {
	preds := mixed()
	var s Stats
	for _, p := range preds {
		s.Add(p)
	}
	want := Measure(preds)
	if got := s.Metrics(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Stats.Metrics\n%+v\nMeasure\n%+v", got, want)
	}
	var a, b, merged Stats
	for i, p := range preds {
		if i%3 == 0 {
			a.Add(p)
		} else {
			b.Add(p)
		}
	}
	for _, part := range []Stats{a, b, {}} {
		if err := merged.Merge(part); err != nil {
			t.Fatal(err)
		}
	}
	got := merged.Metrics()
	if got.N != want.N || got.Skipped != want.Skipped || got.Accuracy != want.Accuracy || got.Floor != want.Floor {
		t.Errorf("merged counts %+v, want %+v", got, want)
	}
	for _, pair := range [][2]float64{{got.NLL, want.NLL}, {got.ECE, want.ECE}, {got.Brier, want.Brier}, {*got.MAE, *want.MAE}} {
		if math.Abs(pair[0]-pair[1]) > 1e-12 {
			t.Errorf("merged %v, want %v", pair[0], pair[1])
		}
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Stats
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Metrics(), want) {
		t.Error("statistics read back from JSON measure otherwise")
	}
	if m := (Stats{}).Metrics(); m.N != 0 || len(m.Bins) != NumBins || m.MAE != nil {
		t.Errorf("empty statistics: %+v", m)
	}
}

// A gate from the statistics is the lowest edge of a gate bin holding a
// case at which the cases pass the bound, with their exact counts: what
// SuggestGate's rule gives with those edges as the candidates.
func TestStatsSuggestGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		preds  []calibration.Prediction
		target float64
	}{
		{"choices", overconfident(3000, 4, 3, 8), 0.05},
		{"nouls", nouls(4000, 1, 9), 0.02},
		{"sure and right", cases(400, 0, 0.97), 0.02},
		{"too few", cases(100, 0, 0.97), 0.02},
	} {
		var s Stats
		for _, p := range tc.preds {
			s.Add(p)
		}
		got := s.SuggestGate(tc.target)
		// The edges of the bins that hold a case: below the lowest
		// confidence seen, a lower edge gates nothing more.
		held := map[int]bool{}
		for _, p := range tc.preds {
			held[bin(p.Confidence(), GateBins)] = true
		}
		lowest := -1
		for i := GateBins - 1; i >= 0; i-- {
			if !held[i] {
				continue
			}
			e := float64(i) / GateBins
			if ClopperPearsonUpper(WrongAbove(tc.preds, e), countAbove(tc.preds, e), GateConfidence) < tc.target {
				lowest = i
			}
		}
		if (lowest < 0) != (got.Threshold == nil) {
			t.Fatalf("%s: gate %v; the lowest calibration.Edge that passes is %d", tc.name, got.Threshold, lowest)
		}
		if lowest < 0 {
			continue
		}
		cg := SuggestGate(tc.preds, tc.target)
		t.Logf("%s: %.3f from the statistics, %.4f from the cases", tc.name, *got.Threshold, *cg.Threshold)
		if *got.Threshold != float64(lowest)/GateBins {
			t.Errorf("%s: gate %v, want %v", tc.name, *got.Threshold, float64(lowest)/GateBins)
		}
		if got.Above != countAbove(tc.preds, *got.Threshold) || got.WrongAbove != WrongAbove(tc.preds, *got.Threshold) {
			t.Errorf("%s: %d above, %d wrong; the cases say %d, %d", tc.name, got.Above, got.WrongAbove, countAbove(tc.preds, *got.Threshold), WrongAbove(tc.preds, *got.Threshold))
		}
		if !(got.UpperBound < tc.target) || got.Coverage != float64(got.Above)/float64(len(tc.preds)) {
			t.Errorf("%s: bound %v over %v, or coverage %v", tc.name, got.UpperBound, tc.target, got.Coverage)
		}
	}
}

func countAbove(preds []calibration.Prediction, t float64) int {
	n := 0
	for _, p := range preds {
		if p.Check() == nil && p.Confidence() >= t-calibration.Edge {
			n++
		}
	}
	return n
}

// A bucket's statistics report what its cases report, but for the gate.
func TestBucketStatsReport(t *testing.T) {
	preds := biased(2000, 4, 1.5, 1, 2, 6)
	c, err := FitVector(preds)
	if err != nil {
		t.Fatal(err)
	}
	got := bucketStats(preds, c).Report("m", decision.Choice, "3-4", 0.05)
	want := caseReport(preds, c, 0.05)
	got.Gate, want.Gate = Gate{}, Gate{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("from statistics\n%+v\nfrom cases\n%+v", got, want)
	}
	if !(got.AccuracyCalibrated > got.Accuracy) || got.Method != calibration.MethodVector {
		t.Errorf("the report does not show the vector fit: %+v", got)
	}
}

// bucketStats counts preds raw and calibrated by c.
func bucketStats(preds []calibration.Prediction, c calibration.Calibrator) BucketStats {
	b := BucketStats{Calibrator: c}
	for _, p := range preds {
		b.Raw.Add(p)
		p.Dist = c.Apply(p.Dist)
		b.Calibrated.Add(p)
	}
	return b
}

// caseReport is a bucket's report from its cases, raw and calibrated by
// c: what BucketStats.Report gives from statistics, but for the gate.
func caseReport(preds []calibration.Prediction, c calibration.Calibrator, target float64) BucketReport {
	cal := calibration.Calibrate(preds, c)
	return bucketReport("m", decision.Choice, "3-4", c, Measure(preds), Measure(cal), SuggestGate(cal, target))
}

// Statistics read back broken are refused by Merge and measure as empty;
// nothing panics.
func TestStatsHostile(t *testing.T) {
	for _, data := range []string{
		`{"n": 5}`,
		`{"n": 5, "bin_count": [1]}`,
		`{"n": 5, "right": 9, "bin_count": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`,
		`{"n": 1, "nll": -1}`,
	} {
		var s Stats
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			t.Fatal(err)
		}
		var into Stats
		if err := into.Merge(s); err == nil {
			t.Errorf("%s merged", data)
		}
		if m := s.Metrics(); m.N != 0 {
			t.Errorf("%s measures %+v", data, m)
		}
		if g := s.SuggestGate(0.05); g.Threshold != nil {
			t.Errorf("%s suggests a gate", data)
		}
	}
}

func TestRefitState(t *testing.T) {
	var r RefitState
	r.Observe(20)
	r.Observe(-5)
	if r.Due(30) || r.New() != 20 {
		t.Errorf("%+v due at 30", r)
	}
	r.Observe(10)
	if !r.Due(30) {
		t.Errorf("%+v not due at 30", r)
	}
	r.Refitted()
	if r.Due(30) || r.New() != 0 || r.Due(0) {
		t.Errorf("%+v due right after a refit", r)
	}
	r.Observe(1)
	if !r.Due(0) {
		t.Errorf("%+v: one new outcome is due at a minimum of 0", r)
	}
}

// BenchmarkBucketReport compares a bucket's report from its statistics
// with one from its cases, over 100,000 outcomes.
func BenchmarkBucketReport(b *testing.B) {
	preds := overconfident(100000, 4, 1.5, 1)
	c := calibration.TemperatureCalibrator(2)
	st := bucketStats(preds, c)
	b.Run("stats", func(b *testing.B) {
		for b.Loop() {
			st.Report("m", decision.Choice, "3-4", 0.05)
		}
	})
	b.Run("cases", func(b *testing.B) {
		for b.Loop() {
			caseReport(preds, c, 0.05)
		}
	})
}

// Refitted records a refit of every outcome seen, adopted or refused.
// Only the tests record one so: the tracker records the outcomes there
// were when a refit's cases were taken.
func (r *RefitState) Refitted() { r.AtLastRefit = r.Outcomes }

// A gate from the statistics is never 0, which gates nothing, where the
// cases' own gate stops above it: a score's predicted level can hold no
// probability (0.5, 0, 0.5 answers level 1), and such answers, right or
// not, leave the gate where the answers above them put it.
func TestStatsSuggestGateNeverZero(t *testing.T) {
	var preds []calibration.Prediction
	for range 200 { // sure and right
		preds = append(preds, calibration.Prediction{Kind: decision.Score, Dist: decision.Distribution{0, 0.99, 0.01}, Expected: 1, Options: 3})
	}
	for range 20 { // level 1 at probability 0, and right
		preds = append(preds, calibration.Prediction{Kind: decision.Score, Dist: decision.Distribution{0.5, 0, 0.5}, Expected: 1, Options: 3})
	}
	var s Stats
	for _, p := range preds {
		s.Add(p)
	}
	got, cases := s.SuggestGate(0.05), SuggestGate(preds, 0.05)
	if cases.Threshold == nil || *cases.Threshold <= 0 {
		t.Fatalf("the cases' gate: %+v", cases)
	}
	if got.Threshold == nil || *got.Threshold <= 0 {
		th := "none"
		if got.Threshold != nil {
			th = fmt.Sprint(*got.Threshold)
		}
		t.Errorf("gate from the statistics %s (coverage %v, %d above), want one in (0, 1] as the cases' %v", th, got.Coverage, got.Above, *cases.Threshold)
	}
}
