package decisionlog

import (
	"regexp"
	"testing"
	"time"
)

// TestNewRequestIDSortsByTime checks Jev's shape (req_ and 32 hex
// digits), that an id made in a later millisecond sorts after an earlier
// one (the decision log's index then grows at its end), and that ids
// made in the same millisecond still differ.
func TestNewRequestIDSortsByTime(t *testing.T) {
	shape := regexp.MustCompile(`^req_[0-9a-f]{32}$`)
	seen := map[string]bool{}
	prev := NewRequestID()
	for range 5 {
		time.Sleep(2 * time.Millisecond) // past the clock's millisecond
		for range 200 {
			id := NewRequestID()
			if !shape.MatchString(id) {
				t.Fatalf("%q is not req_ and 32 hex digits", id)
			}
			if seen[id] {
				t.Fatalf("%q made twice", id)
			}
			seen[id] = true
		}
		next := NewRequestID()
		if next[:4+12] <= prev[:4+12] {
			t.Errorf("%s, made later, does not sort after %s", next, prev)
		}
		prev = next
	}
}
