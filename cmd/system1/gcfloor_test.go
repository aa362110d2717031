package main

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fleet"
)

// TestGCPercentFor holds the heap target gcPercentFor sets, the larger of
// live + (live + roots) × GOGC/100 and 4 MiB × GOGC/100 as the runtime
// computes it, at the floor while the live
// heap is under half of it (never under the floor) and at the default's
// above.
func TestGCPercentFor(t *testing.T) {
	const floor = 16 << 20
	for _, roots := range []uint64{0, 1 << 20, 3 << 20} {
		for _, live := range []uint64{1, 1 << 10, 3 << 20, 7<<20 + 12345, floor/2 - 1, floor / 2, floor, 64 << 20} {
			p := gcPercentFor(live, roots, floor)
			target := max(live+(live+roots)*uint64(p)/100, heapMinimum*uint64(p)/100)
			want := uint64(floor)
			if 2*live+roots >= floor {
				want = 2*live + roots
			}
			if p < 100 || target < want || target > want+(live+roots)/100+1 {
				t.Errorf("live %d, roots %d: GOGC %d puts the target at %d, want %d", live, roots, p, target, want)
			}
		}
	}
	if p := gcPercentFor(0, 1<<20, floor); p != 100 {
		t.Errorf("before any collection: GOGC %d, want the default 100", p)
	}
}

// serve's floor is gcFloor but while a batch route's fan-out runs, and
// bulkGCFloor, run's, while one does.
func TestServeFloorFollowsBulkWork(t *testing.T) {
	n, err := fleet.NewNode(config.Node{Name: "n", URL: "http://127.0.0.1:1", Dialect: "openai", Models: []string{"m"}, MaxInFlight: 2},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	svc := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{})})
	if f := serveFloor(); f != gcFloor {
		t.Fatalf("floor %d before any batch, want %d", f, gcFloor)
	}
	var during []uint64
	var mu sync.Mutex
	svc.Each(t.Context(), "m", 1, 3, 0, func(context.Context, int) {
		mu.Lock()
		during = append(during, serveFloor())
		mu.Unlock()
	})
	for _, f := range during {
		if f != bulkGCFloor {
			t.Errorf("floor %d during a batch, want %d", f, bulkGCFloor)
		}
	}
	if f := serveFloor(); f != gcFloor || len(during) != 3 || bulkGCFloor <= gcFloor {
		t.Errorf("floor %d after the batch (want %d), %d rows seen", f, gcFloor, len(during))
	}
}
