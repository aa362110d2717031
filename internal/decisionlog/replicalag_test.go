package decisionlog

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Two replicas share one log: one answers and records while its writer
// lingers, and the caller's feedback reaches the other at once. The
// other must find the answer, not answer 404 for an id that was
// acknowledged moments ago; an old unknown id is still a 404. The writer
// lingers the default 100 ms, which leaves its transaction most of
// ReplicaLag, however slowly the machine commits it.
func TestFeedbackWaitsForAnotherReplicasWriter(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			answering := b.open(t, Options{Linger: DefaultLinger})
			other := b.open(t, Options{Linger: -1})
			id := NewRequestID()
			answering.Record(sample(id, "c", time.Now()))
			if _, err := other.Outcome(ctxT(t), id, "c", "billing"); err != nil {
				t.Fatalf("feedback on the other replica: %v", err)
			}
			old := "req_" + fmt.Sprintf("%012x", time.Now().Add(-time.Hour).UnixMilli()) + "00000000000000000000"
			if _, err := other.Outcome(ctxT(t), old, "c", "billing"); !errors.Is(err, ErrUnknownRequest) {
				t.Fatalf("an hour-old unknown id: %v, want ErrUnknownRequest", err)
			}
		})
	}
}

func TestRequestIDTime(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	at, ok := requestIDTime(NewRequestID())
	if !ok || at.Before(before) || at.After(time.Now()) {
		t.Fatalf("requestIDTime(NewRequestID()) = %v, %v; want a time from %v to now", at, ok, before)
	}
	for _, id := range []string{"", "req_", "abc", "req_zz" + fmt.Sprint(make([]byte, 30)), "req_0123456789abcdef0123456789abcde", "my-own-id"} {
		if _, ok := requestIDTime(id); ok {
			t.Errorf("requestIDTime(%q) took it as a made id", id)
		}
	}
}
