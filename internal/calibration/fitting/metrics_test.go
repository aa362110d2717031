package fitting

import (
	"encoding/json"
	"math"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// handSet is a small mixed set whose metrics are worked out by hand in
// TestMeasureByHand.
func handSet() []calibration.Prediction {
	return []calibration.Prediction{
		// A: predicts 0 with .7, right.
		{Kind: decision.Choice, Dist: decision.Distribution{.7, .2, .1}, Expected: 0, Options: 3},
		// B: predicts 0 with .5, wrong.
		{Kind: decision.Choice, Dist: decision.Distribution{.5, .3, .2}, Expected: 1, Options: 3},
		// C: predicts true with .8, the answer is false: wrong.
		{Kind: decision.Noul, Dist: decision.Distribution{.8, .2}, Expected: 1, Options: 2},
		// D: predicts false with .6, right.
		{Kind: decision.Noul, Dist: decision.Distribution{.4, .6}, Expected: 1, Options: 2},
		// E: expected level .2 + 1.4 = 1.6 -> 2 with .7, right.
		{Kind: decision.Score, Dist: decision.Distribution{.1, .2, .7}, Expected: 2, Options: 3},
		// F: expected level .5 + 1 = 1.5 -> 2 (half up) with .5; the answer
		// 0 was reported as 0: wrong, and NLL hits the floor.
		{Kind: decision.Score, Dist: decision.Distribution{0, .5, .5}, Expected: 0, Options: 3},
		// An invalid case: skipped.
		{Kind: decision.Choice, Dist: decision.Distribution{.5, .4}, Expected: 0, Options: 2},
	}
}

func TestMeasureByHand(t *testing.T) {
	m := Measure(handSet())
	acc := 2.0 / 3
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"n", float64(m.N), 6},
		{"skipped", float64(m.Skipped), 1},
		// A, D and E are right: 3/6.
		{"accuracy", m.Accuracy, .5},
		// Bins by confidence*15: .7 -> 10 (A, E), .5 -> 7 (B, F), .8 -> 12
		// (C), .6 -> 9 (D). Per bin count*|acc - conf|: bin 10 2*|1-.7| =
		// .6, bin 7 2*|0-.5| = 1, bin 12 1*|0-.8| = .8, bin 9 1*|1-.6| =
		// .4; (.6 + 1 + .8 + .4)/6 = 2.8/6.
		{"ece", m.ECE, 2.8 / 6},
		// A .3²+.2²+.1² = .14; B .5²+.7²+.2² = .78; C .8²+.8² = 1.28;
		// D .4²+.4² = .32; E .1²+.2²+.3² = .14; F 1²+.5²+.5² = 1.5;
		// 4.16/6.
		{"brier", m.Brier, 4.16 / 6},
		// -ln of p[expected]: .7, .3, .2, .6, .7 and the floor 1e-6.
		{"nll", m.NLL, -(math.Log(.7) + math.Log(.3) + math.Log(.2) + math.Log(.6) + math.Log(.7) + math.Log(1e-6)) / 6},
		// Score cases only: E |1.6-2| = .4, F |1.5-0| = 1.5; 1.9/2.
		{"mae", deref(m.MAE), .95},
		// Expected indices 0, 1, 1, 1, 2, 0: index 1 three times of 6.
		{"floor", m.Floor, .5},
		// Confidence >= .7: A (right), C (wrong), E (right).
		{"selective 0.7 n", float64(m.Selective["0.7"].N), 3},
		{"selective 0.7 coverage", m.Selective["0.7"].Coverage, .5},
		{"selective 0.7 accuracy", deref(m.Selective["0.7"].Accuracy), acc},
		{"selective 0.9 n", float64(m.Selective["0.9"].N), 0},
		{"selective 0.9 coverage", m.Selective["0.9"].Coverage, 0},
		{"bin 10 count", float64(m.Bins[10].Count), 2},
		{"bin 10 accuracy", m.Bins[10].Accuracy, 1},
		{"bin 10 confidence", m.Bins[10].Confidence, .7},
		{"bin 7 count", float64(m.Bins[7].Count), 2},
		{"bin 7 accuracy", m.Bins[7].Accuracy, 0},
		{"bin 12 confidence", m.Bins[12].Confidence, .8},
		{"bin 7 lo", m.Bins[7].Lo, 7.0 / 15},
		{"bin 7 hi", m.Bins[7].Hi, 8.0 / 15},
	} {
		if !near(tc.got, tc.want, 1e-12) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if m.Selective["0.9"].Accuracy != nil {
		t.Errorf("accuracy over no case is %v, want nil", *m.Selective["0.9"].Accuracy)
	}
	if m.Selective["0.7"].Threshold != .7 || m.Selective["0.9"].Threshold != .9 {
		t.Errorf("thresholds %+v", m.Selective)
	}
	var count int
	for _, b := range m.Bins {
		count += b.Count
	}
	if len(m.Bins) != NumBins || count != m.N {
		t.Errorf("%d bins hold %d cases, want %d bins holding %d", len(m.Bins), count, NumBins, m.N)
	}
}

func TestMeasureEmptyAndEncodable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		preds []calibration.Prediction
	}{
		{"nil", nil},
		{"only invalid", []calibration.Prediction{{Kind: decision.Choice}}},
		{"hand set", handSet()},
		{"no score", handSet()[:4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Measure(tc.preds)
			for _, v := range []float64{m.Accuracy, m.ECE, m.Brier, m.NLL, m.Floor} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("non-finite metric in %+v", m)
				}
			}
			if len(m.Bins) != NumBins || len(m.Selective) != 2 {
				t.Fatalf("%d bins, %d thresholds", len(m.Bins), len(m.Selective))
			}
			if m.Bins[0].Lo != 0 || m.Bins[NumBins-1].Hi != 1 {
				t.Errorf("bins span [%v, %v]", m.Bins[0].Lo, m.Bins[NumBins-1].Hi)
			}
			if _, err := json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			hasScore := false
			for _, p := range tc.preds {
				hasScore = hasScore || (p.Kind == decision.Score && p.Check() == nil)
			}
			if (m.MAE != nil) != hasScore {
				t.Errorf("MAE %v with score cases %v", m.MAE, hasScore)
			}
			if m.N == 0 && (m.Accuracy != 0 || m.ECE != 0 || m.Selective["0.7"].Accuracy != nil) {
				t.Errorf("empty set measured %+v", m)
			}
		})
	}
}

func TestBinEdges(t *testing.T) {
	for k := range NumBins {
		if got := bin(float64(k)/NumBins, NumBins); got != k {
			t.Errorf("bin(%d/15) = %d", k, got)
		}
	}
	for _, tc := range []struct {
		c    float64
		want int
	}{
		{0, 0}, {.06, 0}, {.2, 3}, {.4, 6}, {.6, 9}, {.8, 12}, {.93, 13}, {.94, 14}, {.99, 14}, {1, 14},
	} {
		if got := bin(tc.c, NumBins); got != tc.want {
			t.Errorf("bin(%v) = %d, want %d", tc.c, got, tc.want)
		}
	}
}

// A noul reported as P(true) = .3 has confidence 1 - .3, which must reach
// the 0.7 threshold whatever the floating-point rounding of 1 - .3.
func TestSelectiveThresholdIsInclusive(t *testing.T) {
	m := Measure([]calibration.Prediction{
		{Kind: decision.Noul, Dist: decision.Distribution{.3, .7}, Expected: 1, Options: 2},
		{Kind: decision.Choice, Dist: decision.Distribution{.9, .1}, Expected: 1, Options: 2},
		{Kind: decision.Choice, Dist: decision.Distribution{.69, .31}, Expected: 0, Options: 2},
	})
	s7, s9 := m.Selective["0.7"], m.Selective["0.9"]
	if s7.N != 2 || !near(s7.Coverage, 2.0/3, 1e-12) || deref(s7.Accuracy) != .5 {
		t.Errorf("0.7: %+v", s7)
	}
	if s9.N != 1 || deref(s9.Accuracy) != 0 {
		t.Errorf("0.9: %+v", s9)
	}
}

// calibratedSet has, for each confidence c = .40, .45, ..., 1, 100 choice
// cases over three options reporting c on option 0, of which exactly
// 100*c have option 0 as the answer: every confidence is right exactly as
// often as it says.
func calibratedSet() []calibration.Prediction {
	var out []calibration.Prediction
	for step := 8; step <= 20; step++ {
		c := float64(step) / 20
		d := decision.Distribution{c, (1 - c) / 2, (1 - c) / 2}
		right := 5 * step // 100*c
		for i := range 100 {
			exp := 0
			if i >= right {
				exp = 1 + i%2
			}
			out = append(out, calibration.Prediction{Kind: decision.Choice, Dist: d, Expected: exp, Options: 3})
		}
	}
	return out
}

func TestPerfectlyCalibratedSet(t *testing.T) {
	preds := calibratedSet()
	m := Measure(preds)
	if m.N != 1300 || m.Skipped != 0 {
		t.Fatalf("measured %d, skipped %d", m.N, m.Skipped)
	}
	if m.ECE >= .01 {
		t.Errorf("ECE %v on a calibrated set, want < 0.01", m.ECE)
	}
	t.Logf("calibrated set: ECE %.3g, NLL %.4f, accuracy %.4f", m.ECE, m.NLL, m.Accuracy)
	for _, b := range m.Bins {
		if b.Count > 0 && !near(b.Accuracy, b.Confidence, 1e-9) {
			t.Errorf("bin [%v, %v): accuracy %v, confidence %v", b.Lo, b.Hi, b.Accuracy, b.Confidence)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
