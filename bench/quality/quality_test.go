package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"system1/internal/calibration"
	"system1/internal/cases"
	"system1/internal/decision"
)

func someCases(n int) []cases.Case {
	cs := make([]cases.Case, n)
	for i := range cs {
		cs[i] = cases.Case{ID: fmt.Sprintf("set-dev-%d", i*7+3)}
	}
	return cs
}

func ids(cs []cases.Case) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

// The parts depend on the ids and the seed, not on the file's order:
// shuffled, the same cases fall on the same sides; every case is in
// exactly one later part; the sizes are the shares asked; another seed
// deals them otherwise.
func TestPartsAreDeterministic(t *testing.T) {
	cs := someCases(301)
	shuffled := slices.Clone(cs)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, tc := range []struct {
		folds int
		share float64
	}{{1, 0.5}, {1, 0.3}, {2, 0}, {3, 0}, {5, 0}} {
		t.Run(fmt.Sprintf("folds=%d share=%v", tc.folds, tc.share), func(t *testing.T) {
			a, b := parts(cs, tc.folds, tc.share, 1), parts(shuffled, tc.folds, tc.share, 1)
			other := parts(cs, tc.folds, tc.share, 2)
			if len(a) != max(tc.folds, 1) || len(b) != len(a) {
				t.Fatalf("%d and %d loops for %d folds", len(a), len(b), tc.folds)
			}
			later := map[string]int{}
			differs := false
			for i := range a {
				for _, side := range [][2][]cases.Case{{a[i].First, b[i].First}, {a[i].Later, b[i].Later}} {
					x, y := ids(side[0]), ids(side[1])
					slices.Sort(x)
					slices.Sort(y)
					if !slices.Equal(x, y) {
						t.Fatalf("loop %d: the shuffled file put other cases on a side", i)
					}
				}
				if len(a[i].First)+len(a[i].Later) != len(cs) {
					t.Fatalf("loop %d: %d first + %d later of %d", i, len(a[i].First), len(a[i].Later), len(cs))
				}
				for _, c := range a[i].Later {
					later[c.ID]++
				}
				differs = differs || !slices.Equal(ids(a[i].Later), ids(other[i].Later))
			}
			if !differs {
				t.Error("seed 2 dealt the cases as seed 1 did")
			}
			if tc.folds == 1 {
				if want := int(math.Round(tc.share * float64(len(cs)))); len(a[0].First) != want {
					t.Errorf("%d first, want %d", len(a[0].First), want)
				}
				return
			}
			for _, c := range cs {
				if later[c.ID] != 1 {
					t.Fatalf("%s is in %d later parts", c.ID, later[c.ID])
				}
			}
			for i := range a {
				if m := len(a[i].Later); m < len(cs)/tc.folds || m > len(cs)/tc.folds+1 {
					t.Errorf("fold %d holds %d of %d", i, m, len(cs))
				}
			}
		})
	}
}

// The simulated slack of one loop agrees with the exact beta-binomial
// one, and both shrink as the parts grow; pooling two folds lowers it.
func TestSlack(t *testing.T) {
	for _, tc := range []struct {
		n, m int
		c    float64
	}{{50, 50, 0.9}, {200, 200, 0.8}, {200, 200, 0.95}, {400, 100, 0.9}} {
		exact := coverageSlack(tc.n, tc.m, tc.c, slackLevel)
		run := simRun{}
		for i := range tc.n + tc.m {
			if i < tc.n {
				run.first = append(run.first, i)
			} else {
				run.later = append(run.later, i)
			}
		}
		sim := poolSlack(tc.n+tc.m, []simRun{run}, tc.c, slackLevel, 5000, 1)
		t.Logf("n %d, m %d, coverage %.2f: slack %.4f exact, %.4f simulated", tc.n, tc.m, tc.c, exact, sim)
		if !(exact > 0 && exact < 0.2) || math.Abs(sim-exact) > 1.5/float64(tc.m) {
			t.Errorf("n %d, m %d, coverage %.2f: slack %.4f exact, %.4f simulated", tc.n, tc.m, tc.c, exact, sim)
		}
	}
	if small, large := coverageSlack(100, 100, 0.9, slackLevel), coverageSlack(1000, 1000, 0.9, slackLevel); !(large < small) {
		t.Errorf("slack %.4f at 1000 cases, %.4f at 100", large, small)
	}
	one := setSlack([]int{200}, []int{200}, 1, 0.9, 1)
	two := setSlack([]int{200, 200}, []int{200, 200}, 2, 0.9, 1)
	if !(two < one) {
		t.Errorf("two folds of 200: slack %.4f, not under one loop's %.4f", two, one)
	}
	if got := coverageSlack(5, 5, 0.95, slackLevel); got != 0 {
		t.Errorf("5 cases at 0.95 (too few): slack %v, want 0", got)
	}
}

// A perfectly calibrated model's ECE on a few hundred answers is far from
// 0, and shrinks with more of them: the floor the report prints.
func TestECEFloorShrinksWithAnswers(t *testing.T) {
	conf := func(n int) []float64 {
		rng := rand.New(rand.NewPCG(3, 4))
		out := make([]float64, n)
		for i := range out {
			out[i] = 0.5 + 0.5*rng.Float64()
		}
		return out
	}
	small, _ := eceFloor(conf(200), 200, 1)
	large, _ := eceFloor(conf(5000), 200, 1)
	t.Logf("ECE floor: %.4f at 200 answers, %.4f at 5000", small, large)
	if !(small > 0.02) || !(large < small/3) {
		t.Errorf("ECE floor %.4f at 200 answers, %.4f at 5000", small, large)
	}
}

// parseSets reads X-System1-Sets as the server writes it: a question's
// keys, an empty set, a set by position (mask), and unavailable; another
// question's items are skipped, and a key that is not an option, or a
// mask of another length, is an error.
func TestParseSets(t *testing.T) {
	q := decision.Question{ID: "q2", Options: []decision.Option{{Key: "a"}, {Key: "b"}, {Key: "c"}, {Key: "long_key_that_the_header_cuts"}}}
	for _, tc := range []struct {
		header string
		set    []int
		ok     bool
		err    bool
	}{
		{"q1=a; q2=c,a; q3 unavailable", []int{0, 2}, true, false},
		{"q2=", []int{}, true, false},
		{"q1=a; q2 unavailable", nil, false, false},
		{"q2=z", nil, false, true},
		{"q1=a", nil, false, true},
		{"q2=a,long_key_that_the_header_cuts", []int{0, 3}, true, false},
		{"q2=a,long_key_...", nil, false, false},
		{"q2=mask:9", []int{0, 3}, true, false},
		{"q2=mask:0", []int{}, true, false},
		{"q2=mask:90", nil, false, true},
		{"q2=mask:g", nil, false, true},
	} {
		set, ok, err := parseSets(tc.header, q)
		if !slices.Equal(set, tc.set) || ok != tc.ok || (err != nil) != tc.err {
			t.Errorf("%q: %v %v %v", tc.header, set, ok, err)
		}
	}
}

// rawThreshold is the smallest raw-threshold sets that cover as many
// answers as asked: the threshold is the covered-th largest probability
// of a right option, and every option at or above it is in the set.
func TestRawThreshold(t *testing.T) {
	preds := []calibration.Prediction{
		{Kind: decision.Noul, Dist: decision.Distribution{0.9, 0.1}, Expected: 0, Options: 2},
		{Kind: decision.Noul, Dist: decision.Distribution{0.6, 0.4}, Expected: 1, Options: 2},
		{Kind: decision.Noul, Dist: decision.Distribution{0.3, 0.7}, Expected: 1, Options: 2},
		{Kind: decision.Noul, Dist: decision.Distribution{0.2, 0.8}, Expected: 0, Options: 2},
	}
	for _, tc := range []struct {
		covered int
		size    float64 // mean
	}{
		{0, 0},    // no option reaches 1
		{1, 0.25}, // t = 0.9: {0}, {}, {}, {}
		{2, 0.75}, // t = 0.7: {0}, {}, {1}, {1}
		{4, 1.75}, // t = 0.2: {0}, {0,1}, {0,1}, {0,1}
	} {
		got := rawThreshold(preds, tc.covered)
		if got.N != len(preds) || got.Covered != tc.covered || math.Abs(got.MeanSize-tc.size) > 1e-12 {
			t.Errorf("covered %d: %+v, want %d covered, mean size %v", tc.covered, got, tc.covered, tc.size)
		}
	}
}
