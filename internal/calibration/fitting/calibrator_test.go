package fitting

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// biased draws n cases over k options whose reports lean toward the first
// option by bias nats and are too sure by a temperature of sharp: logits
// z_i ~ N(0, spread²), the answer drawn from softmax(z), the report
// softmax(sharp * (z + bias*e_0)). Vector scaling with T = sharp and
// b = (-bias, 0, ...), up to a constant added to every bias, recovers
// softmax(z) exactly; a temperature alone cannot move the argmax back.
func biased(n, k int, spread, bias, sharp float64, seed uint64) []calibration.Prediction {
	r := rand.New(rand.NewPCG(seed, seed^0xb1a5))
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
		exp := draw(r, softmax(z, 1))
		z[0] += bias
		out[i] = calibration.Prediction{Kind: kind, Dist: softmax(z, sharp), Expected: exp, Options: k}
	}
	return out
}

// draw picks an index with the probabilities of d.
func draw(r *rand.Rand, d decision.Distribution) int {
	u := r.Float64()
	for j, p := range d {
		if u < p {
			return j
		}
		u -= p
	}
	return len(d) - 1
}

// A planted pull toward the first label is what a temperature cannot
// remove and vector scaling can: fitted on 3000 cases, on 3000 held-out
// ones vector scaling brings the ECE down to near the sampling floor and
// wins back the accuracy the bias cost, where the best temperature leaves
// both.
func TestFitVectorRemovesFirstLabelBias(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    int
		seed uint64
	}{
		{"choice over four", 4, 1},
		{"noul", 2, 2},
		{"choice over twelve", 12, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fit := biased(3000, tc.k, 1.5, 1.5, 2, tc.seed)
			held := biased(3000, tc.k, 1.5, 1.5, 2, tc.seed+100)
			temp, err := FitMethod(calibration.MethodTemperature, fit)
			if err != nil {
				t.Fatal(err)
			}
			vec, err := FitVector(fit)
			if err != nil {
				t.Fatal(err)
			}
			raw, byT, byV := Measure(held), Measure(calibration.Calibrate(held, temp)), Measure(calibration.Calibrate(held, vec))
			// The truth the model would serve without its bias: the
			// accuracy vector scaling should win back.
			t.Logf("%s; %s", temp, vec)
			t.Logf("held-out accuracy %.3f / %.3f / %.3f, ECE %.4f / %.4f / %.4f, NLL %.4f / %.4f / %.4f (raw / temperature / vector)",
				raw.Accuracy, byT.Accuracy, byV.Accuracy, raw.ECE, byT.ECE, byV.ECE, raw.NLL, byT.NLL, byV.NLL)
			if math.Abs(vec.Temperature-2)/2 > 0.1 {
				t.Errorf("vector T = %v, want 2 within 10%%", vec.Temperature)
			}
			// Only differences of biases mean anything.
			if d := vec.Biases[0] - vec.Biases[1]; math.Abs(d+1.5) > 0.25 {
				t.Errorf("b0 - b1 = %.3f, want -1.5 within 0.25", d)
			}
			gapT, gapV := firstGap(calibration.Calibrate(held, temp)), firstGap(calibration.Calibrate(held, vec))
			t.Logf("first-label gap %.4f / %.4f / %.4f", firstGap(held), gapT, gapV)
			if !(gapV < 0.02) || !(gapT > 0.1) {
				t.Errorf("first-label gap: vector %.4f, temperature %.4f: the bias is not removed", gapV, gapT)
			}
			if !(byV.ECE < byT.ECE) || !(byV.ECE < 0.03) {
				t.Errorf("vector ECE %.4f, temperature %.4f: the bias is not removed", byV.ECE, byT.ECE)
			}
			if !(byV.Accuracy > byT.Accuracy+0.01) {
				t.Errorf("vector accuracy %.3f is not above the temperature's %.3f", byV.Accuracy, byT.Accuracy)
			}
			if byT.Accuracy != raw.Accuracy {
				t.Errorf("a temperature moved the accuracy: %v -> %v", raw.Accuracy, byT.Accuracy)
			}
			if !(byV.NLL < byT.NLL) {
				t.Errorf("vector NLL %.4f is not below the temperature's %.4f", byV.NLL, byT.NLL)
			}
		})
	}
}

// firstGap is how far the mean probability of the first option is from
// how often it is the right one: a calibration error per position that
// the top-label ECE averages away.
func firstGap(preds []calibration.Prediction) float64 {
	var mean, freq float64
	for _, p := range preds {
		mean += p.Dist[0]
		if p.Expected == 0 {
			freq++
		}
	}
	return math.Abs(mean-freq) / float64(len(preds))
}

// On the cases it is fitted on, vector scaling never does worse than the
// temperature it starts from, whatever the data: it accepts only steps
// that lower its loss. Without a bias to find, the biases stay small.
func TestFitVectorNeverWorseThanTemperature(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for trial := range 40 {
		k := 2 + trial%6
		n := 5 + r.IntN(200)
		preds := overconfident(n, k, 0.5+3*r.Float64(), uint64(trial))
		if trial%3 == 0 { // reported to two decimals, zeros included
			for i := range preds {
				preds[i].Dist = decision.Round(preds[i].Dist, 2)
			}
		}
		temp, err := FitMethod(calibration.MethodTemperature, preds)
		if err != nil {
			t.Fatal(err)
		}
		vec, err := FitVector(preds)
		if err != nil {
			t.Fatal(err)
		}
		if err := vec.Check(); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		byT, byV := Measure(calibration.Calibrate(preds, temp)).NLL, Measure(calibration.Calibrate(preds, vec)).NLL
		if byV > byT+1e-9 {
			t.Errorf("trial %d (n %d, k %d): vector NLL %.6f above the temperature's %.6f", trial, n, k, byV, byT)
		}
	}
	preds := overconfident(4000, 4, 1.5, 77)
	vec, err := FitVector(preds)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range vec.Biases {
		if math.Abs(b) > 0.1 {
			t.Errorf("bias %d is %.3f without a bias in the data", i, b)
		}
	}
}

// The gradient FitVector descends is the loss's own: central differences
// agree with it.
func TestVectorLossGradient(t *testing.T) {
	preds := biased(50, 5, 1, 1, 2, 4)
	cases := make([]logCase, len(preds))
	for i, p := range preds {
		cases[i] = newLogCase(p)
	}
	x := []float64{0.3, 0.5, -0.2, 0.1, 0, -0.4}
	g := make([]float64, len(x))
	vectorLoss(cases, x, g)
	scratch := make([]float64, len(x))
	for i := range x {
		h := 1e-6
		xp, xm := append([]float64(nil), x...), append([]float64(nil), x...)
		xp[i] += h
		xm[i] -= h
		num := (vectorLoss(cases, xp, scratch) - vectorLoss(cases, xm, scratch)) / (2 * h)
		if math.Abs(num-g[i]) > 1e-5*max(1, math.Abs(num)) {
			t.Errorf("d/dx%d: analytic %.8f, numeric %.8f", i, g[i], num)
		}
	}
}

func TestCalibratorApplyAndCheck(t *testing.T) {
	vec := calibration.Calibrator{Method: calibration.MethodVector, Temperature: 2, Biases: []float64{math.Log(3), 0}}
	// ln p / 2 + b: {.5, .5} -> {3, 1}/4; the third position has no bias.
	got := vec.Apply(decision.Distribution{.5, .5})
	if math.Abs(got[0]-.75) > 1e-12 || math.Abs(got[1]-.25) > 1e-12 {
		t.Errorf("vector on {.5 .5} = %v, want {.75 .25}", got)
	}
	got = vec.Apply(decision.Distribution{.25, .25, .5, 0})
	want := []float64{3 * .5, .5, math.Sqrt(.5), 0}
	sum := want[0] + want[1] + want[2]
	for i := range want {
		if math.Abs(got[i]-want[i]/sum) > 1e-12 {
			t.Errorf("vector on four: %v, want %v/%v", got, want, sum)
			break
		}
	}
	if got := calibration.TemperatureCalibrator(2).Apply(decision.Distribution{.8, .2}); math.Abs(got[0]-decision.Distribution{.8, .2}.Temper(2)[0]) > 1e-15 {
		t.Errorf("temperature calibrator %v differs from Temper", got)
	}
	for _, bad := range []decision.Distribution{{math.NaN(), 1}, {0, 0}, {.5, .6}, {}} {
		if got := vec.Apply(bad); len(got) != len(bad) || (len(bad) > 0 && &got[0] != &bad[0]) {
			t.Errorf("a broken distribution %v came back as %v, not unchanged", bad, got)
		}
	}
	for _, tc := range []struct {
		c    calibration.Calibrator
		want string
	}{
		{calibration.Identity(), ""},
		{calibration.TemperatureCalibrator(1.5), ""},
		{vec, ""},
		{calibration.Calibrator{Method: "platt", Temperature: 1}, "method"},
		{calibration.Calibrator{Method: calibration.MethodTemperature}, "temperature 0"},
		{calibration.Calibrator{Method: calibration.MethodTemperature, Temperature: math.Inf(1)}, "temperature +Inf"},
		{calibration.Calibrator{Method: calibration.MethodNone, Temperature: 2}, "not 1"},
		{calibration.Calibrator{Method: calibration.MethodTemperature, Temperature: 1, Biases: []float64{1}}, "has biases"},
		{calibration.Calibrator{Method: calibration.MethodVector, Temperature: 1}, "0 biases"},
		{calibration.Calibrator{Method: calibration.MethodVector, Temperature: 1, Biases: make([]float64, 256)}, "256 biases"},
		{calibration.Calibrator{Method: calibration.MethodVector, Temperature: 1, Biases: []float64{math.NaN()}}, "bias 0 is NaN"},
		{calibration.Calibrator{Method: calibration.MethodVector, Temperature: 1, Biases: []float64{0, 21}}, "bias 1 is 21"},
	} {
		err := tc.c.Check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Check = %v, want %q", tc.c, err, tc.want)
		}
		if tc.want != "" {
			d := decision.Distribution{.7, .3}
			if got := tc.c.Apply(d); &got[0] != &d[0] {
				t.Errorf("%+v applied though it fails Check: %v", tc.c, got)
			}
		}
	}
	if s := vec.String(); s != "T=2/b=+1.099,0" {
		t.Errorf("String = %q", s)
	}
}
