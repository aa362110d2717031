package main

import "testing"

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
