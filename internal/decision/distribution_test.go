package decision

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func TestFromLogprobs(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name    string
		lp      []float64
		found   []bool
		want    []float64
		wantErr bool
	}{
		{"renormalises over labels", []float64{math.Log(.3), math.Log(.1)}, []bool{true, true}, []float64{.75, .25}, false},
		{"missing label gets 0", []float64{math.Log(.3), 0}, []bool{true, false}, []float64{1, 0}, false},
		{"masked label gets 0", []float64{-inf, math.Log(.2)}, []bool{true, true}, []float64{0, 1}, false},
		{"tiny values do not underflow", []float64{-1000, -1001}, []bool{true, true}, []float64{1 / (1 + math.Exp(-1)), math.Exp(-1) / (1 + math.Exp(-1))}, false},
		{"float rounding above 0 is tolerated", []float64{5e-5, math.Log(.5)}, []bool{true, true}, nil, false},
		{"NaN is an error", []float64{math.NaN(), 0}, []bool{true, true}, nil, true},
		{"+Inf is an error", []float64{inf, -1}, []bool{true, true}, nil, true},
		{"positive is an error", []float64{0.5, -1}, []bool{true, true}, nil, true},
		{"nothing found", []float64{0, 0}, []bool{false, false}, nil, true},
		{"all masked", []float64{-inf, -inf}, []bool{true, true}, nil, true},
		{"length mismatch", []float64{0}, []bool{true, true}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := FromLogprobs(tc.lp, tc.found)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %v, want an error", d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Check(len(tc.lp)); err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				if math.Abs(d[i]-w) > 1e-12 {
					t.Errorf("p[%d] = %v, want %v", i, d[i], w)
				}
			}
		})
	}
	if _, err := FromLogprobs([]float64{-inf}, []bool{true}); !errors.Is(err, ErrNoMass) {
		t.Errorf("all masked: %v, want ErrNoMass", err)
	}
}

// A NaN from an engine must never reach a reply: it is refused where the
// distribution is made, an invalid distribution yields no answer, and the
// clamp keeps every number that leaves the domain finite.
func TestNaNCannotPoisonTheReply(t *testing.T) {
	nan := math.NaN()
	if _, err := FromLogprobs([]float64{nan, -1}, []bool{true, true}); err == nil {
		t.Fatal("a NaN log-probability made a distribution")
	}
	q := Question{ID: "q", Kind: Choice, Options: []Option{{Key: "a"}, {Key: "b"}}}
	if a, err := NewAnswer(q, Distribution{nan, 1}, 2); err == nil {
		t.Fatalf("a NaN probability made an answer: %+v", a)
	}
	if a, err := NewAnswer(q, Distribution{math.Inf(1), 0}, 2); err == nil {
		t.Fatalf("an infinite probability made an answer: %+v", a)
	}
	for _, x := range []float64{nan, math.Inf(1), math.Inf(-1), -0.5} {
		if got := clamp(x, 1); got != 0 {
			t.Errorf("clamp(%v) = %v, want 0", x, got)
		}
	}
	for _, x := range []float64{nan, math.Inf(1)} {
		d := Distribution{x, .5, .5}
		for _, v := range append(Round(d, 2), ChoiceConfidence(d), ScoreConfidence(d), ExpectedLevel(d), Mass([]float64{x}, []bool{true})) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%v leaked through as %v", x, v)
			}
		}
	}
	b, err := json.Marshal(Round(Distribution{nan, 1}, 2))
	if err != nil {
		t.Fatalf("rounded values do not encode: %v", err)
	}
	if string(b) != "[0,1]" {
		t.Errorf("rounded %s", b)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		d  Distribution
		n  int
		ok bool
	}{
		{Distribution{.5, .5}, 2, true},
		{Distribution{.5, .5 + 1e-10}, 2, true},
		{Distribution{.5, .5 + 1e-8}, 2, false},
		{Distribution{.5, .5}, 3, false},
		{Distribution{-.1, 1.1}, 2, false},
		{Distribution{math.NaN(), 1}, 2, false},
	} {
		if err := tc.d.Check(tc.n); (err == nil) != tc.ok {
			t.Errorf("%v over %d: %v", tc.d, tc.n, err)
		}
	}
}

func TestTemper(t *testing.T) {
	d := Distribution{.7, .2, .1, 0}
	for _, tc := range []struct {
		t    float64
		want Distribution
	}{
		{1, d},
		{0, d},
		{-1, d},
		{math.Inf(1), d},
		{math.NaN(), d},
		{2, normalise(Distribution{math.Sqrt(.7), math.Sqrt(.2), math.Sqrt(.1), 0})},
		{0.5, normalise(Distribution{.49, .04, .01, 0})},
	} {
		got := d.Temper(tc.t)
		if err := got.Check(len(d)); err != nil {
			t.Fatalf("T=%v: %v", tc.t, err)
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-12 {
				t.Errorf("T=%v: p[%d] = %v, want %v", tc.t, i, got[i], tc.want[i])
			}
		}
		if got.Argmax() != d.Argmax() {
			t.Errorf("T=%v moved the argmax", tc.t)
		}
	}
}

func normalise(d Distribution) Distribution {
	var s float64
	for _, p := range d {
		s += p
	}
	out := make(Distribution, len(d))
	for i, p := range d {
		out[i] = p / s
	}
	return out
}

func TestMass(t *testing.T) {
	if got := Mass([]float64{math.Log(.3), math.Log(.2), 0}, []bool{true, true, false}); math.Abs(got-.5) > 1e-12 {
		t.Errorf("mass %v, want 0.5", got)
	}
}

// Dividing a prior out: a uniform prior changes nothing, a prior equal
// to the answer leaves it uniform, a prior of 0 counts as MinPrior, and
// a prior that does not fit leaves the answer as it was.
func TestDivideOut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		d, prior Distribution
		want     Distribution
	}{
		{"uniform prior", Distribution{0.7, 0.2, 0.1}, Distribution{1. / 3, 1. / 3, 1. / 3}, Distribution{0.7, 0.2, 0.1}},
		{"prior equal to the answer", Distribution{0.6, 0.4}, Distribution{0.6, 0.4}, Distribution{0.5, 0.5}},
		{"a skewed prior", Distribution{0.5, 0.5}, Distribution{0.75, 0.25}, Distribution{0.25, 0.75}},
		{"a zero in the prior counts as MinPrior", Distribution{0.5, 0.5}, Distribution{1, 0}, Distribution{1 / (1 + 1/MinPrior), (1 / MinPrior) / (1 + 1/MinPrior)}},
		{"another length", Distribution{0.7, 0.3}, Distribution{0.2, 0.3, 0.5}, Distribution{0.7, 0.3}},
		{"a NaN in the prior", Distribution{0.7, 0.3}, Distribution{math.NaN(), 0.5}, Distribution{0.7, 0.3}},
		{"no prior", Distribution{0.7, 0.3}, nil, Distribution{0.7, 0.3}},
	} {
		got := tc.d.DivideOut(tc.prior)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
		sum := 0.0
		for i := range got {
			sum += got[i]
			if math.Abs(got[i]-tc.want[i]) > 1e-9 {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: %v sums to %v", tc.name, got, sum)
		}
	}
}

// Whatever the prior, dividing it out of a distribution leaves a
// distribution: every entry in [0,1], summing to 1, none NaN.
func FuzzDivideOut(f *testing.F) {
	f.Add(0.7, 0.2, 0.1, 0.5, 0.3, 0.2)
	f.Add(1.0, 0.0, 0.0, 0.0, 0.0, 1.0)
	f.Add(0.5, 0.5, 0.0, math.NaN(), 1e-300, -1.0)
	f.Fuzz(func(t *testing.T, a, b, c, pa, pb, pc float64) {
		d, err := FromLogprobs([]float64{math.Log(math.Abs(a)), math.Log(math.Abs(b)), math.Log(math.Abs(c))}, []bool{a != 0, b != 0, c != 0})
		if err != nil {
			return
		}
		out := d.DivideOut(Distribution{pa, pb, pc})
		if err := out.Check(3); err != nil {
			t.Fatalf("%v divided by [%v %v %v]: %v (%v)", d, pa, pb, pc, out, err)
		}
	})
}
