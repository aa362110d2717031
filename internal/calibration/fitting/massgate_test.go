package fitting

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// SuggestMassGate is the rule MassStats.SuggestMassGate keeps, over the
// masses themselves: the reference its counts are checked against. It
// finds the highest label-mass gate g such that the
// one-sided 95% Clopper–Pearson upper bound on the share of in-scope
// answers with mass under g is under maxLoss. inScope are the label
// masses of answers whose outcome was one of their options, outOfScope
// those of answers none of whose options fit; values that are not in
// [0,1] are left out. Candidates are the in-scope masses observed: a gate
// at one of them keeps it. A maxLoss not in (0, 1) is
// DefaultMaxInScopeLoss. With no mistake allowed the bound is
// 1-0.05^(1/n), so a gate at 5% needs at least 59 in-scope outcomes.
func SuggestMassGate(inScope, outOfScope []float64, maxLoss float64) MassGate {
	if !(maxLoss > 0 && maxLoss < 1) {
		maxLoss = DefaultMaxInScopeLoss
	}
	valid := func(xs []float64) []float64 {
		var out []float64
		for _, x := range xs {
			if x >= 0 && x <= 1 {
				out = append(out, x)
			}
		}
		slices.Sort(out)
		return out
	}
	in, out := valid(inScope), valid(outOfScope)
	g := MassGate{MaxInScopeLoss: maxLoss, InScope: len(in), OutOfScope: len(out)}
	best := -1
	for k := range in {
		// A gate at in[k] loses the answers strictly under it; the bound
		// grows with k, so the first to fail ends the search.
		if !boundUnder(countUnder(in, in[k]), len(in), GateConfidence, maxLoss) {
			break
		}
		best = k
	}
	if best < 0 {
		g.UpperBound = ClopperPearsonUpper(0, len(in), GateConfidence)
		return g
	}
	gate := FloorSignificant(in[best], MassGateDigits)
	g.MinLabelMass = &gate
	// The floor can only keep more: count again at the gate served.
	g.InScopeLost = countUnder(in, gate)
	g.UpperBound = ClopperPearsonUpper(g.InScopeLost, len(in), GateConfidence)
	if len(out) > 0 {
		f := float64(countUnder(out, gate)) / float64(len(out))
		g.Flagged = &f
	}
	return g
}

// countUnder counts the sorted xs under x.
func countUnder(xs []float64, x float64) int {
	n, _ := slices.BinarySearch(xs, x)
	return n
}

// spread is n masses evenly from lo to hi.
func spread(n int, lo, hi float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo + (hi-lo)*float64(i)/float64(max(n-1, 1))
	}
	return out
}

// A suggested label-mass gate keeps the bound on the in-scope loss under
// the target, and is the highest that does: the next in-scope mass above
// it would lose one too many. What it flags of the out-of-scope answers
// is counted at the gate served; too few in-scope outcomes suggest none.
func TestSuggestMassGate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in, out    []float64
		loss       float64
		gate       bool
		wantLoss   float64
		wantInN    int
		wantFlagOK func(*float64) bool
	}{
		{"separated", spread(300, 0.5, 0.95), spread(40, 0, 0.2), 0.05, true, 0.05, 300, func(f *float64) bool { return f != nil && *f == 1 }},
		{"overlapping", spread(300, 0.1, 0.95), spread(40, 0, 0.6), 0.1, true, 0.1, 300, func(f *float64) bool { return f != nil && *f > 0 && *f < 1 }},
		{"no out-of-scope outcomes", spread(300, 0.5, 0.95), nil, 0.05, true, 0.05, 300, func(f *float64) bool { return f == nil }},
		{"default target, hostile values left out", append(spread(300, 0.5, 0.95), math.NaN(), -1, 2, math.Inf(1)), nil, 0, true, DefaultMaxInScopeLoss, 300, func(f *float64) bool { return f == nil }},
		{"too few in scope", spread(40, 0.5, 0.95), spread(10, 0, 0.2), 0.05, false, 0.05, 40, func(f *float64) bool { return f == nil }},
		{"none in scope", nil, spread(10, 0, 0.2), 0.05, false, 0.05, 0, func(f *float64) bool { return f == nil }},
	} {
		g := SuggestMassGate(tc.in, tc.out, tc.loss)
		if g.MaxInScopeLoss != tc.wantLoss || g.InScope != tc.wantInN || (g.MinLabelMass != nil) != tc.gate || !tc.wantFlagOK(g.Flagged) {
			t.Errorf("%s: %+v (flagged %v)", tc.name, g, g.Flagged)
			continue
		}
		if !tc.gate {
			continue
		}
		gate := *g.MinLabelMass
		lost, above := 0, math.Inf(1)
		for _, m := range tc.in {
			if m >= 0 && m <= 1 {
				if m < gate {
					lost++
				}
				if m > gate+0.001 { // past what the floor to three decimals may drop
					above = min(above, m)
				}
			}
		}
		next := 0
		for _, m := range tc.in {
			if m >= 0 && m <= 1 && m < above {
				next++
			}
		}
		switch {
		case g.InScopeLost != lost || g.UpperBound != ClopperPearsonUpper(lost, g.InScope, GateConfidence):
			t.Errorf("%s: gate %v loses %d (bound %v), reported %d (%v)", tc.name, gate, lost, ClopperPearsonUpper(lost, g.InScope, GateConfidence), g.InScopeLost, g.UpperBound)
		case !(g.UpperBound < g.MaxInScopeLoss):
			t.Errorf("%s: bound %v over the target %v", tc.name, g.UpperBound, g.MaxInScopeLoss)
		case math.Floor(gate*1000) != gate*1000 && math.Abs(math.Round(gate*1000)-gate*1000) > 1e-9:
			t.Errorf("%s: gate %v not floored to three decimals", tc.name, gate)
		case !math.IsInf(above, 1) && ClopperPearsonUpper(next, g.InScope, GateConfidence) < g.MaxInScopeLoss:
			t.Errorf("%s: gate %v is not the highest: at %v the bound is %v", tc.name, gate, above, ClopperPearsonUpper(next, g.InScope, GateConfidence))
		}
		flagged := "none to flag"
		if g.Flagged != nil {
			flagged = fmt.Sprintf("%.3f", *g.Flagged)
		}
		t.Logf("%s: min_label_mass %v, %d of %d in scope lost (bound %.4f), out of scope flagged %s", tc.name, gate, g.InScopeLost, g.InScope, g.UpperBound, flagged)
	}
}

// A gate under 0.001 keeps its significant digits: 80 in-scope answers,
// the least of them at a label mass of 0.000665123, pass the bound with
// that one kept and fail it with it lost, so the gate is at it. Floored
// to three decimals it was 0.000, which gates nothing and flags none of
// the out-of-scope answers under it.
func TestSuggestMassGateKeepsSignificantDigits(t *testing.T) {
	in := append([]float64{0.000665123}, spread(79, 0.3, 0.95)...)
	out := []float64{0.0001, 0.0003, 0.0005, 0.2}
	g := SuggestMassGate(in, out, 0.05)
	if g.MinLabelMass == nil {
		t.Fatal("no gate, want 0.000665")
	}
	if *g.MinLabelMass != 0.000665 {
		t.Fatalf("gate %v, want 0.000665", *g.MinLabelMass)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"min_label_mass":0.000665,`) {
		t.Errorf("reported as %s", b)
	}
	if g.InScopeLost != 0 || g.Flagged == nil || *g.Flagged != 0.75 {
		t.Errorf("lost %d, flagged %v; want 0 and 3 of 4", g.InScopeLost, g.Flagged)
	}
}

func TestFloorSignificant(t *testing.T) {
	for _, tc := range []struct {
		x      float64
		digits int
		want   float64
	}{
		{0.000665123, 3, 0.000665},
		{0.000665, 3, 0.000665},
		{0.0006659999, 3, 0.000665},
		{0.98765, 3, 0.987},
		{0.1, 3, 0.1},
		{1, 3, 1},
		{123456, 2, 120000},
		{0.29, 2, 0.29}, // 0.29 * 100 is 28.999999999999996
		{5e-324, 3, 5e-324},
		{0.5, 0, 0.5},
		{0, 3, 0},
		{-0.5, 3, -0.5},
	} {
		if got := FloorSignificant(tc.x, tc.digits); got != tc.want {
			t.Errorf("FloorSignificant(%v, %d) = %v, want %v", tc.x, tc.digits, got, tc.want)
		}
	}
	if got := FloorSignificant(math.NaN(), 3); !math.IsNaN(got) {
		t.Errorf("NaN gives %v", got)
	}
}

func FuzzFloorSignificant(f *testing.F) {
	f.Add(0.000665123, 3)
	f.Add(0.29, 2)
	f.Add(math.MaxFloat64, 1)
	f.Add(5e-324, 17)
	f.Fuzz(func(t *testing.T, x float64, digits int) {
		got := FloorSignificant(x, digits)
		if !(x > 0) || math.IsInf(x, 0) {
			if got != x && !(math.IsNaN(x) && math.IsNaN(got)) {
				t.Fatalf("%v came back as %v", x, got)
			}
			return
		}
		d := min(max(digits, 1), 17)
		unit := math.Pow(10, math.Floor(math.Log10(x))-float64(d)+1)
		if got > x || !(x-got <= unit*(1+1e-9)) || got <= 0 {
			t.Fatalf("FloorSignificant(%v, %d) = %v", x, digits, got)
		}
		if again := FloorSignificant(got, digits); again != got {
			t.Fatalf("not idempotent: %v -> %v -> %v", x, got, again)
		}
	})
}
