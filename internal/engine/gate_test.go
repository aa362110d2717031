package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// testGate admits calls until refuse is set, and counts the calls it has
// in.
type testGate struct {
	timeout time.Duration
	refuse  error
	in      int
}

func (g *testGate) Enter(ctx context.Context) (func(), error) {
	if g.refuse != nil {
		return nil, g.refuse
	}
	g.in++
	return func() { g.in-- }, nil
}

func (g *testGate) Timeout() time.Duration { return g.timeout }

// Call runs f admitted by the context's gate and bounded by its timeout,
// and gives the slot back after; a gate that refuses runs nothing; with no
// gate, f runs at once without a deadline.
func TestCallThroughTheGate(t *testing.T) {
	busy := &Failure{Kind: Busy, Err: errors.New("no slot")}
	for _, tc := range []struct {
		name     string
		gate     *testGate
		ran      bool
		deadline bool
		err      error
	}{
		{"no gate", nil, true, false, nil},
		{"admitted", &testGate{timeout: time.Hour}, true, true, nil},
		{"no timeout", &testGate{}, true, false, nil},
		{"busy", &testGate{timeout: time.Hour, refuse: busy}, false, false, busy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.gate != nil {
				ctx = WithGate(ctx, tc.gate)
			}
			ran := false
			err := Call(ctx, func(ctx context.Context) error {
				ran = true
				if tc.gate != nil && tc.gate.in != 1 {
					t.Errorf("%d calls in the gate during the call, want 1", tc.gate.in)
				}
				d, ok := ctx.Deadline()
				if ok != tc.deadline || ok && time.Until(d) > tc.gate.timeout {
					t.Errorf("deadline %v (%v), want one: %v", d, ok, tc.deadline)
				}
				return nil
			})
			if ran != tc.ran || !errors.Is(err, tc.err) {
				t.Errorf("ran %v, err %v; want %v, %v", ran, err, tc.ran, tc.err)
			}
			if tc.gate != nil && tc.gate.in != 0 {
				t.Errorf("%d calls still in the gate after it", tc.gate.in)
			}
		})
	}
}
