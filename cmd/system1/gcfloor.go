package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"system1/internal/answer"
)

// gcFloor is the least heap target serve lets the collector aim for
// while no batch runs (then bulkGCFloor). A forwarding server's live
// heap is a few MiB, so Go's default (collect when the heap reaches
// twice the live one) collected every few dozen requests and the
// collector took a fifth of the CPU at saturation
// (docs/benchmarks.md, issue 34); a run's is 3 to 4 MiB, collected every
// hundred rows. With the floor, a live heap of 1 to 3 MiB is collected
// at 10 MiB, several times less often; a live heap over about half the
// floor is collected at twice its size, as by default, so the floor
// costs at most its own size in memory, never a multiple of the live
// heap. 10 MiB keeps a forwarding server with the decision log on under
// 45 MiB of RSS; 16 cost 8 MiB more for no CPU measurable once a request
// allocated less (docs/benchmarks.md).
const gcFloor = 10 << 20

// bulkGCFloor is the floor of bulk work: run's, and serve's while a
// batch route's fan-out runs (answer.Bulk). At twice gcFloor the
// collector runs half as often; side by side on the fake engine it took
// a tenth to a sixth off a row's CPU, in run and on the batch route, for
// 15 MiB more resident (docs/benchmarks.md); at 64 MiB, about the same
// CPU for 47 MiB more. A forwarding server runs no batch, so its
// resident memory is gcFloor's.
const bulkGCFloor = 32 << 20

// serveFloor is serve's floor now: bulkGCFloor while a batch runs.
func serveFloor() uint64 {
	if answer.Bulk() {
		return bulkGCFloor
	}
	return gcFloor
}

// gcPercentFor is the GOGC that puts the heap target at floor where the
// default's (100) would be under it, and the default elsewhere. The
// runtime's target is live + (live + roots) × GOGC/100, where roots are
// the goroutine stacks and globals it scanned: leaving them out made the
// target many times the floor when the live heap was small.
//
// The runtime also keeps the target at least 4 MiB × GOGC/100 (its
// heapMinimum), which for a live heap of 1 MiB put the target at 32 MiB
// instead of a floor of 20 (seen with GODEBUG=gctrace=1): GOGC is
// capped where that minimum reaches the floor, which then holds the
// target there by itself.
func gcPercentFor(live, roots, floor uint64) int {
	if live == 0 || 2*live+roots >= floor {
		return 100
	}
	p := ((floor-live)*100 + live + roots - 1) / (live + roots) // rounded up: not under the floor
	return int(min(p, floor*100/heapMinimum))
}

// heapMinimum is the runtime's least heap target at GOGC=100
// (runtime.defaultHeapMinimum).
const heapMinimum = 4 << 20

// keepGCFloor keeps the collector's heap target at least floor() bytes,
// setting GOGC after each collection from the live heap it left and the
// floor then (gcPercentFor). It does nothing where GOGC is set in the
// environment: the operator's choice stands. GOMEMLIMIT, set or not,
// still caps the heap as the runtime documents.
func keepGCFloor(getenv func(string) string, floor func() uint64) {
	if getenv("GOGC") != "" {
		return
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	last := -1
	var tune func()
	tune = func() {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[1].Value.Kind() == metrics.KindUint64 && s[2].Value.Kind() == metrics.KindUint64 {
			if p := gcPercentFor(s[0].Value.Uint64(), s[1].Value.Uint64()+s[2].Value.Uint64(), floor()); p != last {
				debug.SetGCPercent(p)
				last = p
			}
		}
		// A finalizer runs once, after the collection that finds its
		// object unreachable: a new sentinel each time calls tune after
		// every collection, for the life of the process.
		runtime.SetFinalizer(new(sentinel), func(*sentinel) { tune() })
	}
	tune()
}

// sentinel is a finalizer's object. It holds a pointer so that it is not
// one of the tiny allocator's objects, which share a block with others
// and are collected only with all of them.
type sentinel struct{ _ *byte }
