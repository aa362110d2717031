package fitting

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// overconfident draws n cases over k options whose reports are too sure by
// a temperature of 2: logits z_i ~ N(0, spread²), the answer drawn from
// softmax(z), the report softmax(z / 0.5) = softmax(2z). Tempering the
// report by T = 2 gives back softmax(z), the calibrated distribution.
func overconfident(n, k int, spread float64, seed uint64) []calibration.Prediction {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	kind := decision.Choice
	if k == 2 {
		kind = decision.Noul
	}
	out := make([]calibration.Prediction, n)
	z := make([]float64, k)
	for i := range out {
		for j := range z {
			z[j] = spread * r.NormFloat64()
		}
		truth := softmax(z, 1)
		u, exp := r.Float64(), k-1
		for j, p := range truth {
			if u < p {
				exp = j
				break
			}
			u -= p
		}
		out[i] = calibration.Prediction{Kind: kind, Dist: softmax(z, 2), Expected: exp, Options: k}
	}
	return out
}

func softmax(z []float64, scale float64) decision.Distribution {
	top := slices.Max(z)
	d := make(decision.Distribution, len(z))
	var s float64
	for i, v := range z {
		d[i] = math.Exp(scale * (v - top))
		s += d[i]
	}
	for i := range d {
		d[i] /= s
	}
	return d
}

func TestFitTemperatureRecoversOverconfidence(t *testing.T) {
	// Over 30 seeds, 4000 choices over four options recover T within 4.1%
	// at worst; a noul carries less information per case, and 12000 of
	// them recover it with a spread of 1.3% (4000 would spread 3%).
	for _, tc := range []struct {
		name string
		n, k int
		seed uint64
	}{
		{"choice over four", 4000, 4, 1},
		{"noul", 12000, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			preds := overconfident(tc.n, tc.k, 1.5, tc.seed)
			got, err := FitTemperature(preds)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-2)/2 > .05 {
				t.Errorf("T = %v, want 2 within 5%%", got)
			}
			before, after := Measure(preds), Measure(Temper(preds, got))
			t.Logf("T = %.4f; ECE %.4f -> %.4f; NLL %.4f -> %.4f", got, before.ECE, after.ECE, before.NLL, after.NLL)
			if after.ECE >= before.ECE || after.NLL >= before.NLL {
				t.Errorf("the fit did not help: ECE %v -> %v, NLL %v -> %v", before.ECE, after.ECE, before.NLL, after.NLL)
			}
			if after.Accuracy != before.Accuracy && tc.k > 2 {
				t.Errorf("tempering moved the answers: accuracy %v -> %v", before.Accuracy, after.Accuracy)
			}
		})
	}
}

// The search lands on the minimum of the loss to within its tolerance: the
// loss a little either side of the result is no lower.
func TestFitTemperatureIsAMinimum(t *testing.T) {
	preds := overconfident(500, 3, 1, 7)
	got, err := FitTemperature(preds)
	if err != nil {
		t.Fatal(err)
	}
	at := func(temp float64) float64 { return Measure(Temper(preds, temp)).NLL }
	for _, f := range []float64{math.Exp(-1e-4), math.Exp(1e-4), .9, 1.1} {
		if at(got*f) < at(got)-1e-12 {
			t.Errorf("NLL at %v (%v) is below NLL at the fit %v (%v)", got*f, at(got*f), got, at(got))
		}
	}
}

func TestFitTemperatureEdges(t *testing.T) {
	certain := []calibration.Prediction{
		{Kind: decision.Choice, Dist: decision.Distribution{1, 0}, Expected: 0, Options: 2},
		{Kind: decision.Choice, Dist: decision.Distribution{0, 1}, Expected: 0, Options: 2},
	}
	// Always right at .6: sharper is always better, down to the edge.
	underconfident := []calibration.Prediction{
		{Kind: decision.Noul, Dist: decision.Distribution{.6, .4}, Expected: 0, Options: 2},
		{Kind: decision.Noul, Dist: decision.Distribution{.4, .6}, Expected: 1, Options: 2},
	}
	// Right half the time at .9: the best is the flat end of the range.
	coinflip := []calibration.Prediction{
		{Kind: decision.Noul, Dist: decision.Distribution{.9, .1}, Expected: 0, Options: 2},
		{Kind: decision.Noul, Dist: decision.Distribution{.9, .1}, Expected: 1, Options: 2},
	}
	for _, tc := range []struct {
		name    string
		preds   []calibration.Prediction
		want    float64
		wantErr bool
	}{
		{"empty", nil, 0, true},
		{"invalid case", []calibration.Prediction{certain[0], {Kind: decision.Choice}}, 0, true},
		{"certain reports keep 1", certain, 1, false},
		{"underconfident goes to the low edge", underconfident, MinTemperature, false},
		{"uninformative goes to the high edge", coinflip, MaxTemperature, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FitTemperature(tc.preds)
			if (err != nil) != tc.wantErr {
				t.Fatalf("T = %v, err %v", got, err)
			}
			if !tc.wantErr && math.Abs(math.Log(got/tc.want)) > 1e-5 {
				t.Errorf("T = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := FitTemperature(nil); !errors.Is(err, ErrNoCases) {
		t.Errorf("empty set: %v, want ErrNoCases", err)
	}
}

// The mean vectorLoss without biases, which the search minimises, is
// Measure's NLL on Temper's distributions, floor included.
func TestMeanNLLMatchesMeasure(t *testing.T) {
	preds := append(handSet()[:6], overconfident(50, 5, 2, 3)...)
	cases, k := logCases(preds)
	x := make([]float64, k+1)
	for _, temp := range []float64{.05, .3, 1, 2, 7, 20} {
		x[0] = math.Log(1 / temp)
		got, want := vectorLoss(cases, x, make([]float64, k+1))/float64(len(cases)), Measure(Temper(preds, temp)).NLL
		if !near(got, want, 1e-9) {
			t.Errorf("T=%v: meanNLL %v, Measure %v", temp, got, want)
		}
	}
}

func TestTemperCopies(t *testing.T) {
	preds := handSet()[:2]
	out := Temper(preds, 2)
	if preds[0].Dist[0] != .7 {
		t.Fatal("Temper changed its input")
	}
	if out[0].Expected != preds[0].Expected || near(out[0].Dist[0], .7, 1e-3) {
		t.Errorf("tempered %+v", out[0])
	}
	if same := Temper(preds, math.NaN()); same[1].Dist[0] != .5 {
		t.Errorf("NaN tempered %+v", same[1])
	}
}

func TestSplit(t *testing.T) {
	preds := make([]calibration.Prediction, 101)
	for i := range preds {
		preds[i].Expected = i // an id
	}
	ids := func(ps []calibration.Prediction) []int {
		out := make([]int, len(ps))
		for i, p := range ps {
			out[i] = p.Expected
		}
		return out
	}
	for _, tc := range []struct {
		holdout float64
		held    int
	}{
		{.2, 20}, {.25, 25}, {.5, 51}, {0, 0}, {-1, 0}, {math.NaN(), 0}, {1, 101}, {3, 101}, {1e-9, 0},
	} {
		fit, held := Split(preds, tc.holdout, 42)
		if len(held) != tc.held || len(fit)+len(held) != len(preds) {
			t.Errorf("holdout %v: %d fitted, %d held, want %d held of %d", tc.holdout, len(fit), len(held), tc.held, len(preds))
		}
		all := append(ids(fit), ids(held)...)
		slices.Sort(all)
		for i, id := range all {
			if id != i {
				t.Fatalf("holdout %v: the sets are not a partition: %v", tc.holdout, all)
			}
		}
		if !slices.IsSorted(ids(fit)) || !slices.IsSorted(ids(held)) {
			t.Errorf("holdout %v: order not kept", tc.holdout)
		}
		fit2, held2 := Split(preds, tc.holdout, 42)
		if !slices.Equal(ids(fit), ids(fit2)) || !slices.Equal(ids(held), ids(held2)) {
			t.Errorf("holdout %v: two splits with one seed differ", tc.holdout)
		}
	}
	_, a := Split(preds, .3, 1)
	_, b := Split(preds, .3, 2)
	if slices.Equal(ids(a), ids(b)) {
		t.Error("two seeds gave the same split")
	}
	// The held set is not just the first or last cases.
	if ids(a)[0] == 0 && ids(a)[len(a)-1] == len(a)-1 {
		t.Errorf("held out a prefix: %v", ids(a))
	}
	if fit, held := Split(nil, .5, 1); fit != nil || held != nil {
		t.Errorf("nil split into %v, %v", fit, held)
	}
}

func TestGroups(t *testing.T) {
	preds := []calibration.Prediction{
		{Kind: decision.Score, Dist: decision.Distribution{.5, .5}, Expected: 0, Options: 2},
		{Kind: decision.Choice, Dist: decision.Distribution{.2, .2, .2, .2, .2}, Expected: 0, Options: 5},
		{Kind: decision.Choice, Dist: decision.Distribution{.5, .5}, Expected: 1, Options: 2},
		{Kind: decision.Noul, Dist: decision.Distribution{.5, .5}, Expected: 0, Options: 2},
		{Kind: decision.Choice, Dist: decision.Distribution{.25, .25, .25, .25}, Expected: 3, Options: 4},
		{Kind: decision.Choice, Dist: decision.Distribution{.5, .5}, Expected: 0, Options: 2},
		{Kind: "rank", Dist: decision.Distribution{.5, .5}, Expected: 0, Options: 2},
	}
	var got []string
	for _, g := range Groups(preds) {
		got = append(got, string(g.Kind)+"/"+g.Bucket+"/"+string(rune('0'+len(g.Preds))))
	}
	want := []string{"choice/2/2", "choice/3-4/1", "choice/5-10/1", "noul/2/1", "score/2/1", "rank/2/1"}
	if !slices.Equal(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	if g := Groups(preds)[0]; g.Preds[0].Expected != 1 || g.Preds[1].Expected != 0 {
		t.Errorf("order within a group not kept: %+v", g.Preds)
	}
}

func TestNewFit(t *testing.T) {
	preds := overconfident(2000, 3, 1.5, 5)
	fit, held := Split(preds, .25, 9)
	f, err := NewFit(fit, held)
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != decision.Choice || f.Bucket != "3-4" || f.N != 1500 || f.Holdout == nil || f.Holdout.N != 500 {
		t.Fatalf("fit %+v", f)
	}
	if math.Abs(f.Temperature-2)/2 > .1 {
		t.Errorf("T = %v, want about 2", f.Temperature)
	}
	h := f.Holdout
	t.Logf("T = %.4f; fitted NLL %.4f -> %.4f, ECE %.4f -> %.4f; held out NLL %.4f -> %.4f, ECE %.4f -> %.4f",
		f.Temperature, f.NLLBefore, f.NLLAfter, f.ECEBefore, f.ECEAfter, h.NLLBefore, h.NLLAfter, h.ECEBefore, h.ECEAfter)
	if f.NLLAfter >= f.NLLBefore || h.NLLAfter >= h.NLLBefore || h.ECEAfter >= h.ECEBefore {
		t.Errorf("the fit did not help: %+v, holdout %+v", f, *h)
	}
	f.Date = "2025-01-02"
	if _, err := (&calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{f}}).Encode(); err != nil {
		t.Errorf("a fresh fit does not encode: %v", err)
	}
	if f, err := NewFit(fit, nil); err != nil || f.Holdout != nil {
		t.Errorf("no held-out set: %+v, %v", f, err)
	}
	noul := calibration.Prediction{Kind: decision.Noul, Dist: decision.Distribution{.5, .5}, Expected: 0, Options: 2}
	wide := calibration.Prediction{Kind: decision.Choice, Dist: make(decision.Distribution, 12), Expected: 0, Options: 12}
	wide.Dist[0] = 1
	for _, tc := range []struct {
		name      string
		fit, held []calibration.Prediction
	}{
		{"nothing to fit", nil, held},
		{"another kind fitted", append([]calibration.Prediction{noul}, fit...), nil},
		{"another kind held out", fit, []calibration.Prediction{noul}},
		{"another bucket held out", fit, []calibration.Prediction{wide}},
		{"invalid case", fit, []calibration.Prediction{{Kind: decision.Choice}}},
	} {
		if _, err := NewFit(tc.fit, tc.held); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func near(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }
