package jobs

import (
	"testing"
	"time"
)

// TestBackoff holds the one pause both deciders wait between tries to its
// rule: the pause asked for when there is one, else 500ms doubled per try
// with a quarter's jitter either way, never past maxWait, however many
// tries were made (a shift past the int's width must not turn it to 0).
func TestBackoff(t *testing.T) {
	const maxWait = 30 * time.Second
	for _, tc := range []struct {
		name            string
		attempt         int
		retryAfter      time.Duration
		lowest, highest time.Duration
	}{
		{"first try", 0, 0, 375 * time.Millisecond, 625 * time.Millisecond},
		{"third try", 2, 0, 1500 * time.Millisecond, 2500 * time.Millisecond},
		{"capped", 9, 0, maxWait, maxWait},
		{"past the int's width", 70, 0, maxWait, maxWait},
		{"asked for", 3, 7 * time.Second, 7 * time.Second, 7 * time.Second},
		{"asked for too long", 0, time.Hour, maxWait, maxWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 50 {
				if got := Backoff(tc.attempt, tc.retryAfter, maxWait); got < tc.lowest || got > tc.highest {
					t.Fatalf("Backoff(%d, %v, %v) = %v, want within [%v, %v]", tc.attempt, tc.retryAfter, maxWait, got, tc.lowest, tc.highest)
				}
			}
		})
	}
}
