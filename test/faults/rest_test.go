package faults_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"system1/internal/fakeengine"
)

// Every node answered 429 and rests for its Retry-After: a request
// meanwhile reaches none of them, and its 503 says, as the first one's
// did, when to come back (the soonest a node is asked again), so that a
// client that honours Retry-After does not retry into the same rest.
// Before, only the request that met the 429s carried a Retry-After.
func TestEveryNodeRestingPassesItsRetryAfter(t *testing.T) {
	for _, tg := range everywhere {
		t.Run(string(tg), func(t *testing.T) {
			t.Parallel()
			a := startNode(t, "bad", tg, B{Fault: fakeengine.Status, Status: 429, RetryAfter: "30"}, long)
			b := startNode(t, "bad2", tg, B{Fault: fakeengine.Status, Status: 429, RetryAfter: "20"}, long)
			b.cfg.Priority = 1
			s := serve(t, []*node{a, b}, nil, long, nil)
			first := s.mustPost(t, "/v1/systemone", ticket)
			if first.status != http.StatusServiceUnavailable || first.header.Get("Retry-After") != "20" {
				t.Fatalf("the request that met the 429s: %s, Retry-After %q; want 503 with 20", first, first.header.Get("Retry-After"))
			}
			calls := a.calls() + b.calls()
			r := s.mustPost(t, "/v1/systemone", ticket)
			if r.status != http.StatusServiceUnavailable {
				t.Fatalf("while every node rests: %s, want 503", r)
			}
			if n := a.calls() + b.calls(); n != calls {
				t.Errorf("a node resting for its Retry-After was asked again: %d requests, want %d", n, calls)
			}
			secs, err := strconv.Atoi(r.header.Get("Retry-After"))
			if err != nil || secs < 1 || time.Duration(secs)*time.Second > 20*time.Second {
				t.Errorf("while every node rests: Retry-After %q, want the soonest rest's end, at most 20 s (%s)", r.header.Get("Retry-After"), r)
			}
		})
	}
}
