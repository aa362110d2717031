package fitting

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// Split conformal sets cover as often as asked on exchangeable cases.
// 4000 cases over five options from a model too sure by a temperature of
// 2 are split at random 50 times into 500 to calibrate on and 3500 to
// test on. For continuous scores the coverage given a calibration set is
// Beta(k, n+1-k) with k = ceil((n+1) coverage), whose mean k/(n+1) is at
// least the coverage asked. So every split's test coverage must reach
// the Beta's 0.01% quantile less four binomial standard deviations of the
// 3500 test cases (about 0.025 at 0.9), and the mean over the splits must
// lie within 0.006 of [coverage, coverage + 1/(n+1)]: its standard
// deviation is about 0.002 even were the splits independent.
func TestConformalCoverage(t *testing.T) {
	pool := overconfident(4000, 5, 1.5, 31)
	const nCal, splits = 500, 50
	for _, method := range []string{calibration.ConformalLAC, calibration.ConformalAPS} {
		for _, coverage := range []float64{0.8, 0.9, 0.95} {
			k := float64(calibration.ConformalRank(nCal, coverage))
			m := float64(len(pool) - nCal)
			low := mathext.InvRegIncBeta(k, nCal+1-k, 1e-4) - 4*math.Sqrt(coverage*(1-coverage)/m)
			r := rand.New(rand.NewPCG(uint64(coverage*100), 7))
			var sum, size, worst float64
			worst = 1
			for range splits {
				order := slices.Clone(pool)
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				c, err := FitConformal(order[:nCal], method, coverage)
				if err != nil {
					t.Fatal(err)
				}
				got := c.Evaluate(order[nCal:])
				if got.N != len(pool)-nCal {
					t.Fatalf("evaluated %d cases", got.N)
				}
				if got.Coverage < low {
					t.Errorf("%s at %v: a split covers %.4f, under %.4f", method, coverage, got.Coverage, low)
				}
				sum += got.Coverage
				size += got.MeanSize
				worst = min(worst, got.Coverage)
			}
			mean := sum / splits
			t.Logf("%s at %v: mean coverage %.4f (worst split %.4f, floor %.4f), mean set size %.2f of 5", method, coverage, mean, worst, low, size/splits)
			if mean < coverage-0.006 || mean > coverage+1.0/(nCal+1)+0.006 {
				t.Errorf("%s at %v: mean coverage %.4f", method, coverage, mean)
			}
			if size/splits >= 4.5 {
				t.Errorf("%s at %v: sets of %.2f options say little", method, coverage, size/splits)
			}
		}
	}
}

// The threshold is the ceil((n+1) coverage)-th smallest score; the
// fewest cases that can give one are stated and enforced.
func TestFitConformal(t *testing.T) {
	for _, tc := range []struct {
		coverage float64
		want     int
	}{{0.5, 1}, {0.8, 4}, {0.9, 9}, {0.95, 19}, {0.99, 99}, {0.49, -1}, {0.995, -1}, {math.NaN(), -1}} {
		if got := calibration.ConformalMinCases(tc.coverage); got != tc.want {
			t.Errorf("ConformalMinCases(%v) = %d, want %d", tc.coverage, got, tc.want)
		}
	}
	// Right options at .9, .8, ..., .1: LAC scores .1 .. .9.
	var preds []calibration.Prediction
	for i := 1; i <= 9; i++ {
		p := 1 - float64(i)/10
		preds = append(preds, calibration.Prediction{Kind: decision.Noul, Dist: decision.Distribution{p, 1 - p}, Expected: 0, Options: 2})
	}
	c, err := FitConformal(preds, calibration.ConformalLAC, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	// ceil(10 * 0.8) = 8: the 8th smallest score, 0.8.
	if math.Abs(c.Threshold-0.8) > 1e-12 || c.N != 9 {
		t.Errorf("threshold %v (n %d), want 0.8", c.Threshold, c.N)
	}
	for _, tc := range []struct {
		d    decision.Distribution
		want []int
	}{
		{decision.Distribution{.5, .5}, []int{0, 1}},
		{decision.Distribution{.85, .15}, []int{0}},
		{decision.Distribution{.2, .8}, []int{0, 1}}, // 1 - .2 = .8, on the threshold
		{decision.Distribution{.19, .81}, []int{1}},
		{decision.Distribution{math.NaN(), 1}, nil},
		{decision.Distribution{.5}, nil},
	} {
		if got := c.Set(tc.d); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("LAC set of %v = %v, want %v", tc.d, got, tc.want)
		}
	}
	if _, err := FitConformal(preds, calibration.ConformalLAC, 0.9); err != nil {
		t.Errorf("9 cases at 0.9: %v", err)
	}
	if _, err := FitConformal(preds[:8], calibration.ConformalLAC, 0.9); !errors.Is(err, ErrTooFewForCoverage) || !strings.Contains(err.Error(), "at least 9") {
		t.Errorf("8 cases at 0.9: %v", err)
	}
	for _, tc := range []struct {
		method   string
		coverage float64
		preds    []calibration.Prediction
		want     string
	}{
		{"raps", 0.9, preds, `method "raps"`},
		{calibration.ConformalAPS, 0.3, preds, "coverage 0.3"},
		{calibration.ConformalAPS, math.NaN(), preds, "coverage NaN"},
		{calibration.ConformalAPS, 0.9, append(slices.Clone(preds), calibration.Prediction{Kind: decision.Noul, Dist: decision.Distribution{2, -1}, Options: 2}), "case 9"},
		{calibration.ConformalAPS, 0.9, nil, "0 cases"},
	} {
		if _, err := FitConformal(tc.preds, tc.method, tc.coverage); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s at %v: %v, want %q", tc.method, tc.coverage, err, tc.want)
		}
	}
	// APS: the options by probability, the set a prefix of that order
	// whose mass reaches no more than the threshold.
	aps := calibration.Conformal{Method: calibration.ConformalAPS, Coverage: 0.9, N: 100, Threshold: 0.75}
	for _, tc := range []struct {
		d    decision.Distribution
		want []int
	}{
		{decision.Distribution{.1, .5, .25, .15}, []int{1, 2}},
		{decision.Distribution{.8, .1, .1}, []int{}},
		{decision.Distribution{.25, .25, .25, .25}, []int{0, 1, 2}},
	} {
		if got := aps.Set(tc.d); !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("APS set of %v = %v, want %v", tc.d, got, tc.want)
		}
	}
	for _, bad := range []calibration.Conformal{
		{Method: "x", Coverage: 0.9, N: 100},
		{Method: calibration.ConformalLAC, Coverage: 1, N: 100},
		{Method: calibration.ConformalLAC, Coverage: 0.9, N: 8},
		{Method: calibration.ConformalLAC, Coverage: 0.9, N: 100, Threshold: math.NaN()},
		{Method: calibration.ConformalLAC, Coverage: 0.9, N: 100, Threshold: 1.5},
	} {
		if bad.Check() == nil || bad.Set(decision.Distribution{.5, .5}) != nil {
			t.Errorf("%+v passes Check or gives a set", bad)
		}
	}
}
