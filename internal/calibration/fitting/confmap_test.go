package fitting

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

func TestFitMapByHand(t *testing.T) {
	// Right, wrong, right, right at .6, .7, .8, .9: the first two pool to
	// 1/2 over two cases, smoothed to (1 + 1/2)/3 = 1/2; the others are 1
	// over one case each, smoothed to 3/4.
	var preds []calibration.Prediction
	for i, right := range []bool{true, false, true, true} {
		c := 0.6 + float64(i)/10
		exp := 0
		if !right {
			exp = 1
		}
		preds = append(preds, calibration.Prediction{Kind: decision.Noul, Dist: decision.Distribution{c, 1 - c}, Expected: exp, Options: 2})
	}
	m, ok := mapOf(preds)
	if !ok {
		t.Fatal("no map")
	}
	wantX, wantY := []float64{.6, .7, .8, .9}, []float64{.5, .5, .75, .75}
	for i := range wantX {
		if len(m.X) != 4 || math.Abs(m.X[i]-wantX[i]) > 1e-12 || math.Abs(m.Y[i]-wantY[i]) > 1e-12 {
			t.Fatalf("map %+v, want x %v y %v", m, wantX, wantY)
		}
	}
	for _, tc := range []struct{ c, want float64 }{{0.1, .5}, {.65, .5}, {.75, .625}, {.8, .75}, {1, .75}, {math.NaN(), .5}} {
		if got := m.Map(tc.c); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Map(%v) = %v, want %v", tc.c, got, tc.want)
		}
	}
}

// On many cases the map is monotone, within (0, 1), at most MaxMapKnots
// long, and on held-out cases of a model whose confidence says nothing
// (right four times in five at any confidence from 0.4 to 0.99, as
// PriorBench found accuracy flat from 0.50 to 0.95) it brings the
// top-label ECE down where a temperature cannot. Selection adopts it on
// top of the calibrator.
func TestFitMapCalibrates(t *testing.T) {
	flat := func(n int, seed uint64) []calibration.Prediction {
		r := rand.New(rand.NewPCG(seed, 1))
		out := make([]calibration.Prediction, n)
		for i := range out {
			c := 0.4 + 0.59*r.Float64()
			top := r.IntN(4)
			d := make(decision.Distribution, 4)
			for j := range d {
				d[j] = (1 - c) / 3
			}
			d[top] = c
			exp := top
			if r.Float64() > 0.8 {
				exp = (top + 1 + r.IntN(3)) % 4
			}
			out[i] = calibration.Prediction{Kind: decision.Choice, Dist: d, Expected: exp, Options: 4, Request: fmt.Sprint(i)}
		}
		return out
	}
	fit, held := flat(3000, 1), flat(3000, 2)
	m, ok := mapOf(fit)
	if !ok {
		t.Fatal("no map")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if len(m.X) > calibration.MaxMapKnots || m.Y[0] <= 0 || m.Y[len(m.Y)-1] >= 1 {
		t.Errorf("%d knots, from %v to %v", len(m.X), m.Y[0], m.Y[len(m.Y)-1])
	}
	tc, err := FitTemperature(fit)
	if err != nil {
		t.Fatal(err)
	}
	var conf, mapped []float64
	var right []bool
	for _, p := range Temper(held, tc) {
		conf, right = append(conf, p.Confidence()), append(right, p.Correct())
	}
	for _, p := range held {
		mapped = append(mapped, m.Map(p.Confidence()))
	}
	byT, byMap := TopECE(conf, right), TopECE(mapped, right)
	t.Logf("held-out top-label ECE: temperature %.2f %.4f, map %.4f (%d knots)", tc, byT, byMap, len(m.X))
	if !(byMap < byT/2) {
		t.Errorf("the map's ECE %.4f is not under half the temperature's %.4f", byMap, byT)
	}
	s, err := Select(fit, calibration.Identity(), SelectOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s.Reason)
	t.Log(s.Map.Reason)
	if !s.Map.Adopt || s.Map.Map == nil || !(s.Map.ECEAfter < s.Map.ECEBefore) {
		t.Errorf("the selection did not adopt the map: %+v", s.Map)
	}
	f, ok := s.AdoptedFit(0.05)
	if !ok || f.ConfidenceMap == nil {
		t.Fatalf("no map in the fit: %+v", f)
	}
	if err := (&calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{f}}).Validate(); err != nil {
		t.Error(err)
	}
	// The held-out cases are as served, the map applied: a gate and the
	// escalations chosen on them hold for the confidences a fit with the
	// map serves, as the fit's own gate is chosen.
	g := SuggestGate(s.HeldOut(), 0.3)
	fg, _ := s.AdoptedFit(0.3)
	if g.Threshold == nil || fg.Gate == nil || *g.Threshold != fg.Gate.Threshold || g.Above != fg.Gate.Above {
		t.Errorf("a gate on the held-out cases, %+v, is not the fit's, %+v", g, fg.Gate)
	}
}

// A map applied to a distribution serves the predicted answer at the
// mapped probability and never changes the answer: a choice's and a
// noul's other options keep their proportions, a score keeps its
// expected level; a value that would put the runner-up ahead is held
// just above the tie, and one no tilt of a score's levels can balance
// moves toward the confidence it had.
func TestConfidenceMapApply(t *testing.T) {
	flat := func(y float64) calibration.ConfidenceMap {
		return calibration.ConfidenceMap{X: []float64{0, 1}, Y: []float64{y, y}}
	}
	for _, tc := range []struct {
		name string
		kind decision.Kind
		m    calibration.ConfidenceMap
		d    decision.Distribution
		conf float64 // the served confidence wanted; 0: the map's value
	}{
		{"choice down", decision.Choice, flat(0.5), decision.Distribution{0.1, 0.8, 0.1}, 0},
		{"choice up", decision.Choice, flat(0.9), decision.Distribution{0.2, 0.5, 0.3}, 0},
		{"choice held above the tie", decision.Choice, flat(0.3), decision.Distribution{0.35, 0.6, 0.05}, 0.35 / 0.75},
		{"noul false", decision.Noul, flat(0.7), decision.Distribution{0.1, 0.9}, 0},
		{"noul true", decision.Noul, flat(0.95), decision.Distribution{0.6, 0.4}, 0},
		{"noul held above the tie", decision.Noul, flat(0.2), decision.Distribution{0.3, 0.7}, 0.5},
		{"score", decision.Score, flat(0.6), decision.Distribution{0.1, 0.2, 0.4, 0.2, 0.1}, 0},
		{"score skewed", decision.Score, flat(0.3), decision.Distribution{0.05, 0.15, 0.5, 0.25, 0.05}, 0},
		{"score that cannot reach", decision.Score, flat(0.99), decision.Distribution{0.3, 0.7, 0, 0, 0}, -1},
		// An engine's sure answer: 1 less its probability is not the
		// rest's sum to the precision a distribution is checked to.
		{"noul all but sure", decision.Noul, flat(0.67), decision.Distribution{0.9999999999742241, 2.5775869079787406e-11}, 0},
		{"choice all but sure", decision.Choice, flat(0.8), decision.Distribution{1.3e-11, 0.999999999974, 1.3e-11}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.m.Apply(tc.kind, tc.d)
			if err := got.Check(len(tc.d)); err != nil {
				t.Fatalf("%v: %v", got, err)
			}
			before := calibration.Prediction{Kind: tc.kind, Dist: tc.d, Options: len(tc.d)}
			after := calibration.Prediction{Kind: tc.kind, Dist: got, Options: len(got)}
			if after.Predicted() != before.Predicted() {
				t.Fatalf("answer moved from %d to %d: %v", before.Predicted(), after.Predicted(), got)
			}
			want := tc.conf
			if want == 0 {
				want = tc.m.Map(before.Confidence())
			}
			switch {
			case want < 0: // only bounds: between what it was and the map's value
				if c := after.Confidence(); !(c >= before.Confidence()-1e-12 && c <= tc.m.Map(before.Confidence())) {
					t.Errorf("confidence %v, not between %v and %v", c, before.Confidence(), tc.m.Map(before.Confidence()))
				}
			case math.Abs(after.Confidence()-want) > 1e-6:
				t.Errorf("confidence %v, want %v: %v", after.Confidence(), want, got)
			}
			if tc.kind == decision.Score {
				if e0, e1 := decision.ExpectedLevel(tc.d), decision.ExpectedLevel(got); math.Abs(e0-e1) > 1e-9 {
					t.Errorf("expected level %v became %v", e0, e1)
				}
				return
			}
			k := before.Predicted()
			rest := func(d decision.Distribution) float64 { // summed: 1 - d[k] loses a sure answer's rest
				var s float64
				for i, q := range d {
					if i != k {
						s += q
					}
				}
				return s
			}
			for i := range tc.d {
				if i != k && tc.d[i] > 0 && math.Abs(got[i]/rest(got)-tc.d[i]/rest(tc.d)) > 1e-9 {
					t.Errorf("option %d's share of the rest moved: %v from %v", i, got, tc.d)
				}
			}
		})
	}
	// A distribution whose answer holds everything, or that is broken,
	// comes back as it is.
	for _, d := range []decision.Distribution{{1, 0, 0}, {0.5, 0.6}} {
		if got := flat(0.5).Apply(decision.Choice, d); !slices.Equal(got, d) {
			t.Errorf("%v became %v", d, got)
		}
	}
}

// mapOf is fitMap of the confidence of each case's predicted answer and
// whether it was right; false for no cases or one that fails Check.
func mapOf(preds []calibration.Prediction) (calibration.ConfidenceMap, bool) {
	if len(preds) == 0 {
		return calibration.ConfidenceMap{}, false
	}
	conf, right := make([]float64, len(preds)), make([]bool, len(preds))
	for i, p := range preds {
		if p.Check() != nil {
			return calibration.ConfidenceMap{}, false
		}
		conf[i], right[i] = p.Confidence(), p.Correct()
	}
	return fitMap(conf, right), true
}
