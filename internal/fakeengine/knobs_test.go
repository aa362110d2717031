package fakeengine

import (
	"math"
	"testing"
)

// Shift moves each label's log-probability by a fixed amount of up to
// Shift, the same on every call of one prompt and label, unrelated
// between labels and prompts; Jitter by a fresh one on every call, up to
// Jitter.
func TestShiftAndJitter(t *testing.T) {
	rec := func(user string) Request { return Request{System: "s", User: user, Labels: []string{"A", "B", "C"}} }
	base := Halving([]string{"A", "B", "C"})
	moved := func(b Behavior, r Request) []float64 {
		lp := b.logprobs(r)
		for i := range lp {
			lp[i] -= base[i]
		}
		return lp
	}
	shift := Behavior{Shift: 0.02, ShiftSeed: 1}
	a, again, other := moved(shift, rec("one")), moved(shift, rec("one")), moved(shift, rec("two"))
	spread := 0.0
	for i := range a {
		if a[i] != again[i] || math.Abs(a[i]) > 0.02 || a[i] == other[i] {
			t.Errorf("label %d: shifted by %v, then %v; %v on another prompt", i, a[i], again[i], other[i])
		}
		spread = math.Max(spread, math.Abs(a[i]-a[0]))
	}
	if spread < 1e-4 {
		t.Errorf("the labels of one prompt moved alike (%v): a shift common to them all cancels out", a)
	}
	jitter := Behavior{Jitter: 0.002}
	j1, j2 := moved(jitter, rec("one")), moved(jitter, rec("one"))
	for i := range j1 {
		if j1[i] == j2[i] || math.Abs(j1[i]) > 0.002 || math.Abs(j2[i]) > 0.002 {
			t.Errorf("label %d: jitter %v, then %v", i, j1[i], j2[i])
		}
	}
}
