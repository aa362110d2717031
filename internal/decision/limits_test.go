package decision

import "testing"

// A request both limits take is bounded by the stricter of each: the
// smaller maximum and the larger minimum.
func TestLimitsIntersect(t *testing.T) {
	a := DefaultLimits()
	b := Limits{MaxStateBytes: 1, MaxInstructionBytes: 1 << 30, MaxOptionBytes: 2, MaxQuestions: 3,
		MinChoiceOptions: 4, MaxChoiceOptions: 50, MinScoreLevels: 1, MaxScoreLevels: 5}
	want := Limits{MaxStateBytes: 1, MaxInstructionBytes: a.MaxInstructionBytes, MaxOptionBytes: 2, MaxQuestions: 3,
		MinChoiceOptions: 4, MaxChoiceOptions: a.MaxChoiceOptions, MinScoreLevels: a.MinScoreLevels, MaxScoreLevels: 5}
	if got := a.Intersect(b); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := b.Intersect(a); got != want {
		t.Errorf("the other way round: got %+v, want %+v", got, want)
	}
}
