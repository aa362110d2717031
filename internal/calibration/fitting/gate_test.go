package fitting

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// binomCDF is P(X <= k) for X ~ Binomial(n, p), summed term by term: an
// independent check of the bound, which goes through the beta function.
func binomCDF(k, n int, p float64) float64 {
	var s float64
	for i := 0; i <= k; i++ {
		lc, _ := math.Lgamma(float64(n + 1))
		li, _ := math.Lgamma(float64(i + 1))
		lr, _ := math.Lgamma(float64(n - i + 1))
		s += math.Exp(lc - li - lr + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return s
}

func TestClopperPearsonUpper(t *testing.T) {
	// Known values: R's binom.test(1, 10, alternative = "less") gives the
	// upper limit 0.3941633; k = 0 and k = n-1 have closed forms.
	if got := ClopperPearsonUpper(1, 10, 0.95); math.Abs(got-0.3941633) > 1e-7 {
		t.Errorf("1 of 10: %v, want 0.3941633", got)
	}
	for _, n := range []int{1, 2, 10, 149, 150, 1000, 100000} {
		if got, want := ClopperPearsonUpper(0, n, 0.95), 1-math.Pow(0.05, 1/float64(n)); math.Abs(got-want) > 1e-12 {
			t.Errorf("0 of %d: %v, want %v", n, got, want)
		}
		if n > 1 {
			if got, want := ClopperPearsonUpper(n-1, n, 0.95), math.Pow(0.95, 1/float64(n)); math.Abs(got-want) > 1e-9 {
				t.Errorf("%d of %d: %v, want %v", n-1, n, got, want)
			}
		}
	}
	// 149 right answers are not enough for a 2% gate; 150 are.
	if ClopperPearsonUpper(0, 148, 0.95) < 0.02 || ClopperPearsonUpper(0, 150, 0.95) >= 0.02 {
		t.Errorf("the 2%% gate's minimum count moved: %v %v", ClopperPearsonUpper(0, 148, 0.95), ClopperPearsonUpper(0, 150, 0.95))
	}
	// At the bound, k or fewer events have probability 1 - level.
	for _, c := range []struct{ k, n int }{{1, 5}, {3, 40}, {5, 100}, {17, 300}, {50, 2000}, {199, 200}} {
		for _, level := range []float64{0.9, 0.95, 0.99} {
			u := ClopperPearsonUpper(c.k, c.n, level)
			if got := binomCDF(c.k, c.n, u); math.Abs(got-(1-level)) > 1e-8 {
				t.Errorf("%d of %d at %v: P(X<=k | p=%v) = %v, want %v", c.k, c.n, level, u, got, 1-level)
			}
		}
	}
	if ClopperPearsonUpper(0, 0, 0.95) != 1 || ClopperPearsonUpper(5, 5, 0.95) != 1 {
		t.Error("no trials or all events must bound at 1")
	}
	// Out of the beta function's domain, an answer and no panic.
	for _, c := range []struct {
		k, n         int
		level, bound float64
	}{{3, 10, 1, 1}, {3, 10, math.NaN(), 1}, {3, 10, 0, 0}, {3, 10, -2, 0}, {-4, 10, 0.95, ClopperPearsonUpper(0, 10, 0.95)}} {
		if got := ClopperPearsonUpper(c.k, c.n, c.level); got != c.bound {
			t.Errorf("%d of %d at %v: %v, want %v", c.k, c.n, c.level, got, c.bound)
		}
	}
	for _, c := range []struct {
		k, n   int
		target float64
		under  bool
	}{{3, 10, 0, false}, {3, 10, math.NaN(), false}, {3, 10, 1.5, true}, {-1, 200, 0.02, true}, {0, 100, 0.02, false}, {0, 148, 0.02, false}, {0, 150, 0.02, true}} {
		if got := boundUnder(c.k, c.n, 0.95, c.target); got != c.under {
			t.Errorf("boundUnder(%d, %d, 0.95, %v) = %v, want %v", c.k, c.n, c.target, got, c.under)
		}
	}
}

// cases builds n two-option choices at confidence conf, wrong of them
// wrong.
func cases(n, wrong int, conf float64) []calibration.Prediction {
	var out []calibration.Prediction
	for i := range n {
		exp := 0
		if i < wrong {
			exp = 1
		}
		out = append(out, calibration.Prediction{Kind: decision.Choice, Dist: decision.Distribution{conf, 1 - conf}, Expected: exp, Options: 2})
	}
	return out
}

func TestSuggestGateHandComputed(t *testing.T) {
	var preds []calibration.Prediction
	preds = append(preds, cases(300, 0, 0.95)...) // bound 0.0099 alone
	preds = append(preds, cases(50, 10, 0.7)...)  // with them 10 of 350: bound 0.047
	preds = append(preds, cases(10, 10, 0.6)...)
	g := SuggestGate(preds, 0.02)
	if g.Threshold == nil || *g.Threshold != 0.95 || g.Above != 300 || g.WrongAbove != 0 || math.Abs(g.Coverage-300.0/360) > 1e-12 {
		t.Fatalf("gate %+v", g)
	}
	if math.Abs(g.UpperBound-(1-math.Pow(0.05, 1.0/300))) > 1e-12 {
		t.Errorf("bound %v", g.UpperBound)
	}
	// 5 wrong of 1000 at 0.9: bound about 0.0105, under 2%, so the gate
	// lets those 5 through and says so.
	g = SuggestGate(append(cases(1000, 5, 0.9), cases(100, 50, 0.55)...), 0)
	if g.Threshold == nil || *g.Threshold != 0.9 || g.WrongAbove != 5 || g.TargetError != DefaultTargetError {
		t.Fatalf("gate %+v", g)
	}
	// A score whose mean level falls between two modes predicts a level
	// given no probability: confidence 0. Right or not, such answers
	// never make the gate 0, which would gate nothing (a fit's gate is in
	// (0, 1]); here all 500 are right, and the gate stays at 0.95.
	between := calibration.Prediction{Kind: decision.Score, Dist: decision.Distribution{0.5, 0, 0.5}, Expected: 1, Options: 3}
	g = SuggestGate(append(cases(300, 0, 0.95), slices.Repeat([]calibration.Prediction{between}, 200)...), 0.02)
	if between.Confidence() != 0 || !between.Correct() || g.Threshold == nil || *g.Threshold != 0.95 || g.Above != 300 {
		t.Fatalf("gate over answers of confidence 0: %+v", g)
	}
	// Answers of confidence 0 within Edge under a step's confidence are
	// at that step, as any others are: a gate at 5e-10 counts them.
	tiny := calibration.Prediction{Kind: decision.Score, Dist: decision.Distribution{0.5 - 2.5e-10, 5e-10, 0.5 - 2.5e-10}, Expected: 1, Options: 3}
	atTiny := append(slices.Repeat([]calibration.Prediction{tiny}, 200), slices.Repeat([]calibration.Prediction{between}, 200)...)
	if tiny.Confidence() != 5e-10 || !tiny.Correct() {
		t.Fatalf("confidence %v, correct %v", tiny.Confidence(), tiny.Correct())
	}
	checkGate(t, atTiny, 0.02)
	// Too few to say anything: no gate.
	g = SuggestGate(cases(100, 0, 0.99), 0.02)
	if g.Threshold != nil || g.Coverage != 0 || g.WrongAbove != 0 {
		t.Fatalf("gate from 100 cases: %+v", g)
	}
	if WrongAbove(preds, 0.7) != 10 || WrongAbove(preds, 0.6) != 20 || WrongAbove(preds, 0.96) != 0 {
		t.Errorf("WrongAbove: %d %d %d", WrongAbove(preds, 0.7), WrongAbove(preds, 0.6), WrongAbove(preds, 0.96))
	}
}

// checkGate holds a gate to its definition by brute force over every
// observed confidence.
func checkGate(t *testing.T, preds []calibration.Prediction, target float64) {
	t.Helper()
	g := SuggestGate(preds, target)
	qualifies := func(th float64) (bool, int, int) {
		n, k := 0, 0
		for _, p := range preds {
			if p.Confidence() >= th-calibration.Edge {
				n++
				if !p.Correct() {
					k++
				}
			}
		}
		return ClopperPearsonUpper(k, n, GateConfidence) < target, n, k
	}
	lowest := math.Inf(1)
	for _, p := range preds {
		if ok, _, _ := qualifies(p.Confidence()); ok && p.Confidence() > 0 { // a gate is in (0, 1]
			lowest = math.Min(lowest, p.Confidence())
		}
	}
	if math.IsInf(lowest, 1) {
		if g.Threshold != nil {
			t.Fatalf("gate %v where no threshold qualifies", *g.Threshold)
		}
		return
	}
	if g.Threshold == nil || math.Abs(*g.Threshold-lowest) > calibration.Edge {
		t.Fatalf("gate %+v, want the lowest qualifying threshold %v", g, lowest)
	}
	_, n, k := qualifies(*g.Threshold)
	if g.Above != n || g.WrongAbove != k || g.WrongAbove != WrongAbove(preds, *g.Threshold) ||
		math.Abs(g.Coverage-float64(n)/float64(len(preds))) > 1e-12 || !(g.UpperBound < target) {
		t.Fatalf("gate %+v; at it %d above, %d wrong", g, n, k)
	}
}

func TestSuggestGateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 100 {
		n := 1 + r.IntN(500)
		skill := r.Float64()
		var preds []calibration.Prediction
		for range n {
			// Confidences on a coarse grid, so ties are common.
			c := 0.5 + float64(r.IntN(51))/100
			exp := 0
			if r.Float64() > c*skill+(1-skill) {
				exp = 1
			}
			preds = append(preds, calibration.Prediction{Kind: decision.Choice, Dist: decision.Distribution{c, 1 - c}, Expected: exp, Options: 2})
		}
		target := []float64{0.01, 0.02, 0.05, 0.2}[trial%4]
		checkGate(t, preds, target)
	}
}

func FuzzSuggestGate(f *testing.F) {
	f.Add([]byte{200, 0, 180, 1, 255, 0, 255, 0}, uint8(2))
	f.Add([]byte{128, 1, 128, 0}, uint8(50))
	f.Fuzz(func(t *testing.T, data []byte, targetPct uint8) {
		var preds []calibration.Prediction
		for i := 0; i+1 < len(data) && len(preds) < 300; i += 2 {
			c := 0.5 + float64(data[i])/510
			preds = append(preds, calibration.Prediction{Kind: decision.Noul, Dist: decision.Distribution{c, 1 - c}, Expected: int(data[i+1] & 1), Options: 2})
		}
		target := float64(targetPct%99+1) / 100 // 0.01..0.99
		checkGate(t, preds, target)
	})
}

func TestBucketReport(t *testing.T) {
	// Over-confident: 0.95 stated, 70% right.
	preds := append(cases(70, 0, 0.95), cases(30, 30, 0.95)...)
	r := caseReport(preds, calibration.TemperatureCalibrator(0.3), 0.02)
	if r.Outcomes != 100 || r.Accuracy != 0.7 || math.Abs(r.ECE-0.25) > 1e-9 || r.Temperature != 0.3 {
		t.Fatalf("report %+v", r)
	}
	fit, err := FitTemperature(preds)
	if err != nil {
		t.Fatal(err)
	}
	good := caseReport(preds, calibration.TemperatureCalibrator(fit), 0.02)
	if !(good.ECECalibrated < 0.01 && good.NLLCalibrated < good.NLL) {
		t.Errorf("the fitted temperature %v: ECE %v -> %v, NLL %v -> %v", fit, good.ECE, good.ECECalibrated, good.NLL, good.NLLCalibrated)
	}
	if good.Gate.Threshold != nil {
		t.Errorf("a gate over 30%% wrong at one confidence: %+v", good.Gate)
	}
}

// A fit's gate is SuggestGate's on its own cases after its temperature:
// the held-out ones where there are, else the fitted ones; none where no
// threshold passes the bound.
func TestFitSetGate(t *testing.T) {
	held := append(cases(300, 0, 0.95), cases(50, 10, 0.7)...)
	fitted := append(cases(1000, 5, 0.9), cases(100, 50, 0.55)...)
	for _, tc := range []struct {
		name        string
		temperature float64
		fit, held   []calibration.Prediction
		on          string
		want        float64 // 0: no gate
		above, n    int
	}{
		{"held out", 1, fitted, held, calibration.GateOnHeldOut, 0.95, 300, 350},
		{"no holdout", 1, fitted, nil, calibration.GateOnFitted, 0.9, 1000, 1100},
		{"too few held out", 1, fitted, cases(100, 0, 0.99), "", 0, 0, 0},
		// Tempered by T=2, 0.95 over two options becomes
		// 0.95^0.5/(0.95^0.5+0.05^0.5), about 0.8134: the gate is on the
		// calibrated confidences.
		{"tempered", 2, fitted, held, calibration.GateOnHeldOut, math.Sqrt(0.95) / (math.Sqrt(0.95) + math.Sqrt(0.05)), 300, 350},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := calibration.Fit{Kind: decision.Choice, Bucket: "2", Temperature: tc.temperature, Gate: &calibration.FitGate{Threshold: 0.5}}
			SetGate(&f, tc.fit, tc.held, 0.02)
			if tc.want == 0 {
				if f.Gate != nil {
					t.Fatalf("gate %+v, want none", *f.Gate)
				}
				return
			}
			g := f.Gate
			if g == nil || math.Abs(g.Threshold-tc.want) > 1e-9 || g.On != tc.on || g.Above != tc.above || g.N != tc.n || g.TargetError != 0.02 || !(g.UpperBound < 0.02) {
				t.Fatalf("gate %+v, want %v on %s with %d of %d above", g, tc.want, tc.on, tc.above, tc.n)
			}
			if err := (&calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{f}}).Validate(); err != nil {
				t.Errorf("a suggested gate fails validation: %v", err)
			}
		})
	}
}

// SetGate chooses the gate on the confidences the fit serves, its map
// applied, since those are what decide grades: every answer served at or
// above the gate keeps the error bound, and without a map it is the
// calibrator's gate.
func TestSetGateWithAMap(t *testing.T) {
	preds := overconfident(3000, 4, 3, 5)
	var f calibration.Fit
	f.Kind = decision.Choice
	f.SetCalibrator(calibration.TemperatureCalibrator(2))
	SetGate(&f, preds, nil, 0.05)
	if f.Gate == nil {
		t.Fatal("no gate without a map")
	}
	if g := SuggestGate(calibration.Calibrate(preds, calibration.TemperatureCalibrator(2)), 0.05); g.Threshold == nil || *g.Threshold != f.Gate.Threshold {
		t.Errorf("gate %+v without a map, the calibrator's is %+v", f.Gate, g)
	}
	m, ok := mapOf(calibration.Calibrate(preds, f.Calibrator()))
	if !ok {
		t.Fatal("no map")
	}
	f.ConfidenceMap = &m
	// The map is flat over its steps, so a gate on what it serves is
	// coarser: at 5% none passes on these cases, at 10% one does.
	SetGate(&f, preds, nil, 0.1)
	served := calibration.Calibrate(preds, f.Calibrator())
	if f.Gate == nil {
		t.Fatal("no gate with a map")
	}
	var above, wrong int
	for _, p := range served {
		if p.Confidence() >= f.Gate.Threshold {
			above++
			if !p.Correct() {
				wrong++
			}
		}
	}
	if above != f.Gate.Above || wrong != f.Gate.WrongAbove || f.Gate.UpperBound >= 0.1 {
		t.Errorf("gate %+v with a map; served at or above it: %d, %d wrong", f.Gate, above, wrong)
	}
}
