package answer_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/engine"
	"system1/internal/fleet"
)

// Each, the fan-out of both batch routes, calls every row once as
// row-wise work, bulk work while it runs (Bulk), as many at once as the nodes serving the model run with
// every slot busy and no more; one at a time for a model no node serves.
// Each row holds until as many rows as expected are in, so the test
// reaches the peak whatever the machine's speed.
func TestEachFillsTheSlots(t *testing.T) {
	for _, tc := range []struct {
		name     string
		model    string
		slots    int
		rows     int
		parallel int
	}{
		{"four slots, eight rows", "m", 4, 8, 4},
		{"more slots than rows", "m", 16, 3, 3},
		{"no node serves it", "x", 4, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An OpenAI-compatible node's slots are its max_inflight; no
			// call is made to learn them.
			n, err := fleet.NewNode(config.Node{Name: "n", URL: "http://127.0.0.1:1", Dialect: "openai", Models: []string{"m"}, MaxInFlight: tc.slots,
				Timeout: config.Duration(time.Second)}, func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			svc := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{})})
			var mu sync.Mutex
			in, peak, released := 0, 0, false
			full := make(chan struct{})
			calls := make([]int, tc.rows)
			if answer.Bulk() {
				t.Fatal("bulk work before any fan-out")
			}
			svc.Each(t.Context(), tc.model, 1, tc.rows, 0, func(ctx context.Context, i int) {
				if !engine.Throughput(ctx) {
					t.Errorf("row %d not asked as row-wise work", i)
				}
				if !answer.Bulk() {
					t.Errorf("row %d: no bulk work while it is asked", i)
				}
				mu.Lock()
				calls[i]++
				in++
				peak = max(peak, in)
				if in == tc.parallel && !released {
					released = true
					close(full)
				}
				mu.Unlock()
				<-full
				mu.Lock()
				in--
				mu.Unlock()
			})
			if peak != tc.parallel {
				t.Errorf("%d rows at once, want %d", peak, tc.parallel)
			}
			if answer.Bulk() {
				t.Error("bulk work after the fan-out returned")
			}
			for i, c := range calls {
				if c != 1 {
					t.Errorf("row %d called %d times", i, c)
				}
			}
		})
	}
}
