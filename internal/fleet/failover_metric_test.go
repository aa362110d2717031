package fleet

import (
	"context"
	"errors"
	"sync"
	"testing"

	"system1/internal/engine"
)

// failoverObserver counts what the router reports as failovers.
type failoverObserver struct {
	noObserver
	mu        sync.Mutex
	failovers int
}

func (o *failoverObserver) Failover(string) {
	o.mu.Lock()
	o.failovers++
	o.mu.Unlock()
}

// system1_failovers_total counts questions moved on after a failure: a
// question asked of the next node because the first does not take it
// (more options than its max_options) moved after no failure.
func TestFailoverCountsFailuresOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		fail error // node a's
		want int
	}{
		{"both answer", nil, 0},
		{"a is down", &engine.Failure{Kind: engine.Unavailable, Err: errors.New("connection refused")}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, fakes, _ := newTestRouter(4, 20) // a takes 4 options at most, b 20
			obs := &failoverObserver{}
			r.obs = obs
			fakes[0].set(c.fail, false)
			req := choiceRequest("m", 3)
			wide := choiceRequest("m", 10).Questions[0]
			wide.ID = "wide"
			req.Questions = append(req.Questions, wide)
			res, err := r.Decide(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range res.Questions {
				if a.Err != nil {
					t.Fatalf("question %d: %v", i, a.Err)
				}
			}
			if obs.failovers != c.want {
				t.Errorf("failovers counted %d, want %d", obs.failovers, c.want)
			}
		})
	}
}
