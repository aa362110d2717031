package fitting

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// Removing cases gives the statistics of the cases that remain: the
// counts exactly, the sums to rounding; removing everything leaves none.
func TestStatsRemove(t *testing.T) {
	preds := mixed()
	var all, rest Stats
	for _, p := range preds {
		all.Add(p)
	}
	for i, p := range preds {
		if i%4 == 0 {
			all.Remove(p)
		} else {
			rest.Add(p)
		}
	}
	got, want := all.Metrics(), rest.Metrics()
	if got.N != want.N || got.Skipped != want.Skipped || got.Accuracy != want.Accuracy || got.Floor != want.Floor ||
		!reflect.DeepEqual(got.Selective, want.Selective) {
		t.Fatalf("after removal %+v, want %+v", got, want)
	}
	for _, pair := range [][2]float64{{got.NLL, want.NLL}, {got.ECE, want.ECE}, {got.Brier, want.Brier}, {*got.MAE, *want.MAE}} {
		if math.Abs(pair[0]-pair[1]) > 1e-9 {
			t.Errorf("after removal %v, want %v", pair[0], pair[1])
		}
	}
	for i := range all.GateN {
		if all.GateN[i] != rest.GateN[i] || all.GateWrong[i] != rest.GateWrong[i] {
			t.Fatalf("gate bin %d: %d/%d, want %d/%d", i, all.GateN[i], all.GateWrong[i], rest.GateN[i], rest.GateWrong[i])
		}
	}
	for i, p := range preds {
		if i%4 != 0 {
			all.Remove(p)
		}
	}
	if m := all.Metrics(); m.N != 0 || m.Skipped != 0 || m.NLL != 0 || m.ECE != 0 {
		t.Errorf("everything removed: %+v", m)
	}
	// What was never added is not taken.
	var one Stats
	one.Add(preds[0])
	one.Remove(calibration.Prediction{Kind: preds[0].Kind, Dist: preds[0].Dist, Expected: (preds[0].Expected + 1) % preds[0].Options, Options: preds[0].Options})
	if one.Metrics().N != 1 {
		t.Errorf("a case never added was removed: %+v", one.Metrics())
	}
}

// MassStats suggest the gate SuggestMassGate suggests on the masses
// themselves: the same gate, counts, bound and share flagged, on masses
// of every scale (0.000665 among them) and many ties.
func TestMassStatsMatchSuggestMassGate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for trial := range 40 {
		var in, out []float64
		var ms MassStats
		n := 20 + r.IntN(400)
		for range n {
			var x float64
			switch r.IntN(4) {
			case 0:
				x = math.Pow(10, -1-5*r.Float64()) // 1e-6 .. 0.1
			case 1:
				x = math.Round(r.Float64()*100) / 100 // ties
			default:
				x = 0.5 + 0.5*r.Float64()
			}
			if r.IntN(8) == 0 {
				out = append(out, x/10)
				ms.Add(x/10, false)
			} else {
				in = append(in, x)
				ms.Add(x, true)
			}
		}
		ms.Add(-1, true) // left out, as SuggestMassGate leaves it
		ms.Add(math.NaN(), false)
		in = append(in, -1)
		for _, loss := range []float64{0.01, 0.05, 0.2} {
			want, got := SuggestMassGate(in, out, loss), ms.SuggestMassGate(loss)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("trial %d at %v: MassStats %+v (gate %v), SuggestMassGate %+v (gate %v)", trial, loss, got, deref(got.MinLabelMass), want, deref(want.MinLabelMass))
			}
		}
	}
	var ms MassStats
	for range 200 {
		ms.Add(0.000665123, true)
	}
	if g := ms.SuggestMassGate(0.05); g.MinLabelMass == nil || *g.MinLabelMass != 0.000665 {
		t.Errorf("a gate of 0.000665 came out as %v", deref(g.MinLabelMass))
	}
	var a, b MassStats
	a.Add(0.3, true)
	b.Add(0.3, true)
	b.Add(0.01, false)
	a.Merge(b)
	a.Remove(0.3, true)
	a.Remove(0.9, true) // never added
	if a.InScope() != 1 || a.OutOfScope() != 1 {
		t.Errorf("merged and removed: %d in scope, %d out", a.InScope(), a.OutOfScope())
	}
}

// A selection's prediction sets are split conformal on calibrated
// scores: the adopted calibrator's method is fitted again on the even
// folds, which the rule carries, and the threshold rests on the odd
// folds' cases under it, at each coverage they are enough for. Their
// cross-validated coverage reaches the level less a finite-sample
// slack, and so does their coverage on fresh answers of the same model,
// which is what the guarantee is about.
func TestSelectionSets(t *testing.T) {
	preds := overconfident(1500, 6, 1.5, 41)
	for i := range preds {
		preds[i].Request = "r" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
	}
	s, err := Select(preds, calibration.Identity(), SelectOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sets, err := s.Sets(calibration.ConformalLAC, SetCoverages())
	if err != nil || len(sets) != len(SetCoverages()) {
		t.Fatalf("%d sets, %v", len(sets), err)
	}
	if !s.Adopt || s.Calibrator.Method == calibration.MethodNone {
		t.Fatalf("no calibrator adopted: %s", s.Reason)
	}
	// A temperature's refit takes the first fold (1500 cases give it
	// about 300), the threshold the other four.
	if s.Calibrator.Method != calibration.MethodTemperature {
		t.Fatalf("adopted %s; the test wants a temperature", s.Calibrator.Method)
	}
	rest := 0
	for _, k := range s.fold {
		if k > 0 {
			rest++
		}
	}
	fresh := overconfident(3000, 6, 1.5, 42)
	for _, c := range sets {
		if c.N != rest || c.Holdout == nil || c.Holdout.N != rest || c.Calibrator == nil || c.Calibrator.Method != s.Calibrator.Method {
			t.Fatalf("set %+v (calibrator %v), want %d cases under a %s", c, c.Calibrator, rest, s.Calibrator.Method)
		}
		if got, slack := c.Evaluate(fresh).Coverage, 4*math.Sqrt(c.Coverage*(1-c.Coverage)/float64(c.N)); got < c.Coverage-slack {
			t.Errorf("at %v fresh answers are covered %.4f of the time, under %.4f", c.Coverage, got, c.Coverage-slack)
		}
		slack := 4 * math.Sqrt(c.Coverage*(1-c.Coverage)/float64(c.N))
		if c.Holdout.Coverage < c.Coverage-slack {
			t.Errorf("at %v the held-out coverage is %.4f, under %.4f", c.Coverage, c.Holdout.Coverage, c.Coverage-slack)
		}
		if err := c.Check(); err != nil {
			t.Error(err)
		}
	}
	f := calibration.Fit{Sets: sets}
	if c, ok := f.SetFor(0.9); !ok || c.Coverage != 0.9 {
		t.Errorf("SetFor(0.9) = %+v %v", c, ok)
	}
	if c, ok := f.SetFor(0.905); !ok || c.Coverage != 0.91 {
		t.Errorf("SetFor(0.905) = %+v %v; want the set at 0.91", c, ok)
	}
	// Few cases: no set at a coverage they cannot support.
	few, err := Select(preds[:40], calibration.Identity(), SelectOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	small, _ := few.Sets(calibration.ConformalLAC, []float64{0.9, 0.99})
	if len(small) != 1 || small[0].Coverage != 0.9 {
		t.Fatalf("40 cases gave sets %+v; want one at 0.9 (0.99 needs %d)", small, calibration.ConformalMinCases(0.99))
	}
	if _, ok := (calibration.Fit{Sets: small}).SetFor(0.95); ok {
		t.Error("a fit without a set at 0.95 or above served one")
	}
	if _, err := few.Sets("rank", []float64{0.9}); err == nil {
		t.Error("an unknown method was taken")
	}
}

func TestSetFolds(t *testing.T) {
	vector := func(biases int) calibration.Calibrator {
		return calibration.Calibrator{Method: calibration.MethodVector, Temperature: 1, Biases: make([]float64, biases)}
	}
	for _, tc := range []struct {
		name  string
		c     calibration.Calibrator
		sizes []int // cases per fold
		want  int
	}{
		{"temperature, one fold enough", calibration.TemperatureCalibrator(2), []int{30, 30, 30, 30, 30}, 1},
		{"level, one fold enough", calibration.Calibrator{Method: calibration.MethodLevel, Temperature: 2}, []int{20, 30, 30, 30, 30}, 1},
		{"temperature, small folds", calibration.TemperatureCalibrator(2), []int{8, 8, 8, 8, 8}, 3},
		{"vector of 4 options, 100 cases", vector(4), []int{60, 60, 60, 60, 60}, 2},
		{"vector of 4 options, large folds", vector(4), []int{100, 60, 60, 60, 60}, 1},
		{"vector of 4 options, small folds", vector(4), []int{30, 30, 30, 30, 30}, 3},
		{"vector of 77 options: today's cap", vector(77), []int{200, 200, 200, 200, 200}, 3},
		{"two folds", vector(12), []int{30, 30}, 1},
	} {
		var fold []int
		for k, n := range tc.sizes {
			for range n {
				fold = append(fold, k)
			}
		}
		if got := setFolds(tc.c, fold, len(tc.sizes)); got != tc.want {
			t.Errorf("%s: %d folds, want %d", tc.name, got, tc.want)
		}
	}
}

// scoreMix draws n five-level scores from a model right on a share right
// of them that reports q on its level and spreads the rest evenly.
func scoreMix(n int, right, q float64, seed uint64) []calibration.Prediction {
	r := rand.New(rand.NewPCG(seed, 0x556))
	share := []float64{.13, .26, .19, .26, .16}
	out := make([]calibration.Prediction, n)
	for i := range out {
		level := draw(r, share)
		said := level
		if r.Float64() > right {
			said = r.IntN(5)
		}
		d := make(decision.Distribution, 5)
		for j := range d {
			d[j] = (1 - q) / 4
		}
		d[said] = q
		out[i] = calibration.Prediction{Kind: decision.Score, Dist: d, Expected: level, Options: 5, Request: "r" + strconv.Itoa(i)}
	}
	return out
}

// Scores judged as scores: on SST-5 as the simulated model answers it, a
// calibrator that lowered NLL and MAE took 3 points of accuracy of the
// rounded level out of fold, too few to be told from noise at 285
// outcomes, and was adopted; the later answers lost them too. A score
// calibrator is adopted only when its out-of-fold MAE and accuracy are
// no worse at all. Here a temperature gains MAE and loses accuracy by an
// interval that holds zero: refused, and nothing that moves the level is
// adopted (a temperature that keeps it may be).
func TestSelectRefusesAScoreCalibratorThatCostsAccuracy(t *testing.T) {
	preds := scoreMix(300, 0.2, 0.6, 9)
	s, err := Select(preds, calibration.Identity(), SelectOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Candidates {
		if c.Method != calibration.MethodTemperature {
			continue
		}
		t.Logf("temperature %s: accuracy gain %s, MAE gain %s; %s", c.Calibrator, c.AccuracyGain, *c.MAEGain, c.Refused)
		if !(c.AccuracyGain.Mean < 0 && c.AccuracyGain.High > 0 && c.MAEGain.Mean > 0) {
			t.Fatalf("the data do not show the trade: accuracy %s, MAE %s", c.AccuracyGain, *c.MAEGain)
		}
		if !strings.Contains(c.Refused, "accuracy would fall") {
			t.Errorf("the temperature was not refused for its accuracy: %q", c.Refused)
		}
	}
	if s.Adopt && s.Calibrator.Method != calibration.MethodLevel {
		t.Errorf("adopted %s: %s", s.Calibrator, s.Reason)
	}
}
