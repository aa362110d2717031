package llamacpp

import (
	"context"
	"slices"
	"testing"
)

// TestKnownLabels holds the labels read from what the tokenizer said:
// the first want candidates that are tokens, none where none is, and
// the candidate to ask about first where one was never asked. Where each
// candidate read is a token they are the candidates' own, without an
// allocation (every question asks twice; it made 5 to 15 a row before),
// and an append to them leaves the candidates as they were.
func TestKnownLabels(t *testing.T) {
	cands := []string{"A", "B", "C", "D", "E"}
	e := &Engine{ids: map[tokenKey]int{}}
	for i, c := range cands[:4] {
		e.ids[tokenKey{"m", c}] = 10 + i
	}
	e.ids[tokenKey{"gap", "A"}] = 1
	e.ids[tokenKey{"gap", "B"}] = -1
	e.ids[tokenKey{"gap", "C"}] = 3
	e.ids[tokenKey{"gap", "D"}] = 4
	e.ids[tokenKey{"none", "A"}] = -1
	e.ids[tokenKey{"none", "B"}] = -1
	for _, c := range []struct {
		model   string
		want    int
		labels  []string
		unknown int
	}{
		{"m", 3, []string{"A", "B", "C"}, -1},
		{"m", 4, []string{"A", "B", "C", "D"}, -1},
		{"m", 5, nil, 4},
		{"m", 0, nil, -1},
		{"gap", 1, []string{"A"}, -1},
		{"gap", 3, []string{"A", "C", "D"}, -1},
		{"gap", 4, nil, 4},
		{"none", 1, nil, 2},
		{"other", 2, nil, 0},
	} {
		labels, unknown := e.known(c.model, cands, c.want)
		if !slices.Equal(labels, c.labels) || (labels == nil) != (c.labels == nil) || unknown != c.unknown {
			t.Errorf("known(%s, %d) = %q, %d, want %q, %d", c.model, c.want, labels, unknown, c.labels, c.unknown)
		}
	}
	e.ids[tokenKey{"none", "C"}] = -1
	e.ids[tokenKey{"none", "D"}] = -1
	e.ids[tokenKey{"none", "E"}] = -1
	if labels, unknown := e.known("none", cands, 2); labels != nil || unknown != -1 {
		t.Errorf("known(none) = %q, %d, want nil, -1", labels, unknown)
	}
	labels, _ := e.known("m", cands, 2)
	_ = append(labels, "X")
	if cands[2] != "C" {
		t.Errorf("an append to the labels wrote %q into the candidates", cands[2])
	}
	if n := testing.AllocsPerRun(100, func() {
		if labels, ok := e.KnownLabels("m", cands, 3); !ok || len(labels) != 3 {
			t.Fatal("KnownLabels lost the labels")
		}
	}); n != 0 {
		t.Errorf("KnownLabels made %v allocations a call, want 0", n)
	}
}

// TestTurnAllocatesNothing holds a read's turn to no allocation: its
// release was a closure over what it took, two allocations every read.
// The tokens it takes go back, the slot's and the call's.
func TestTurnAllocatesNothing(t *testing.T) {
	e := &Engine{calls: &callTokens{calls: make(chan struct{}, 2), slots: []chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}}}
	ctx := context.Background()
	slot := 1
	if n := testing.AllocsPerRun(100, func() {
		tok, h, err := e.turn(ctx, &slot)
		if err != nil || tok != e.calls || len(e.calls.calls) != 1 || len(e.calls.slots[1]) != 1 {
			t.Fatalf("turn took %d calls and %d of the slot (%v)", len(e.calls.calls), len(e.calls.slots[1]), err)
		}
		h.release()
		if len(e.calls.calls) != 0 || len(e.calls.slots[1]) != 0 {
			t.Fatal("release kept a token")
		}
	}); n != 0 {
		t.Errorf("a turn made %v allocations, want 0", n)
	}
}
