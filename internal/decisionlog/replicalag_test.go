package decisionlog

import (
	"context"
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

// Feedback waits only for an id a replica could have made moments ago:
// one whose time is ahead of the clock by more than replicas' clocks
// differ (ReplicaLag) was made by no replica, so it is unknown at once,
// however long the caller would wait.
func TestFeedbackOnAnIDFromTheFutureIsUnknownAtOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			l := b.open(t, Options{Linger: DefaultLinger})
			soon := "req_" + fmt.Sprintf("%012x", time.Now().Add(time.Hour).UnixMilli()) + "00000000000000000000"
			// No deadline: an id the log waited for would never come back.
			ctx := context.Background()
			for _, id := range []string{"req_ffffffffffffffffffffffffffffffff", soon} {
				for _, question := range []string{"", "c"} {
					if _, err := l.Outcome(ctx, id, question, "billing"); !errors.Is(err, ErrUnknownRequest) {
						t.Errorf("Outcome(%s, question %q): %v, want ErrUnknownRequest", id, question, err)
					}
				}
			}
		})
	}
}

// A shadow candidate's answer takes no outcome (its record stays the
// candidate's, apart from the answer given): feedback on its id is
// unknown, as for an id nothing answered.
func TestFeedbackOnAShadowAnswerIsUnknown(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			l := b.open(t, Options{Linger: DefaultLinger})
			id := NewRequestID()
			served := sample(id, "c", time.Now())
			shadow := served
			shadow.RequestID, shadow.Face = ShadowRequestID(id), FaceShadow
			l.Record(served)
			l.Record(shadow)
			if _, err := l.Outcome(ctxT(t), id, "c", "billing"); err != nil {
				t.Fatalf("feedback on the served answer: %v", err)
			}
			for _, question := range []string{"", "c"} {
				if _, err := l.Outcome(ctxT(t), shadow.RequestID, question, "billing"); !errors.Is(err, ErrUnknownRequest) {
					t.Errorf("feedback on the shadow's answer (question %q): %v, want ErrUnknownRequest", question, err)
				}
			}
		})
	}
}

// A request's questions are recorded one by one, so another replica's
// writer may commit the first before the second (its linger ended
// between them): feedback naming the second, sent at once to another
// replica, waits for it as for a request none of whose answers is there
// yet, rather than answer that the request has no such question.
func TestFeedbackWaitsForAQuestionAnotherReplicaStillHolds(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			answering := b.open(t, Options{Linger: DefaultLinger})
			other := b.open(t, Options{Linger: -1})
			id := NewRequestID()
			answering.Record(sample(id, "first", time.Now()))
			if err := answering.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			answering.Record(sample(id, "second", time.Now()))
			if _, err := other.Outcome(ctx, id, "second", "billing"); err != nil {
				t.Fatalf("feedback on the other replica's second question: %v", err)
			}
			if _, err := other.Outcome(ctx, id, "third", "billing"); !errors.Is(err, ErrUnknownQuestion) {
				t.Fatalf("a question the request does not have: %v, want ErrUnknownQuestion", err)
			}
		})
	}
}
