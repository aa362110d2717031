package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/decision"
)

// instantDecider answers at once, with one precomputed result: what is
// measured is the runner's own cost per row (reading, checking, ordering,
// writing, tallying), not a decider's.
type instantDecider struct{ res Result }

func (d instantDecider) Decide(context.Context, decision.Request) (Result, error) { return d.res, nil }
func (d instantDecider) Capacity(context.Context, decision.Request) int           { return 16 }

// peakHeap samples the live heap every millisecond until stop is called,
// which returns the highest sample.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-tick.C:
			case <-done:
				return
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// BenchmarkRun runs whole jobs of 10k and 100k rows (JSONL and CSV, two
// questions, expected outcomes on every row) through a decider that
// answers at once, and reports the runner's cost per row and the peak
// live heap.
func BenchmarkRun(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, format := range []string{"jsonl", "csv"} {
			b.Run(fmt.Sprintf("%s/rows=%d", format, n), func(b *testing.B) {
				dir := b.TempDir()
				in := filepath.Join(dir, "in."+format)
				f, err := os.Create(in)
				if err != nil {
					b.Fatal(err)
				}
				if format == "csv" {
					fmt.Fprintln(f, "id,subject,body,expected.dept")
				}
				for i := range n {
					if format == "csv" {
						fmt.Fprintf(f, "t%d,Invoice %d,\"I was charged twice for order %d, please refund\",billing\n", i, i, i)
					} else {
						fmt.Fprintf(f, `{"id":"t%d","state":{"subject":"Invoice %d","body":"I was charged twice for order %d, please refund"},"expected":{"dept":"billing","urgent":true}}`+"\n", i, i, i)
					}
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				job := testJob(b)
				res, _ := answersFor(job, []byte("s"))
				var ms0, ms1 runtime.MemStats
				var peak uint64
				b.ResetTimer()
				runtime.ReadMemStats(&ms0)
				for i := range b.N {
					out := filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", i))
					stop := peakHeap()
					s, err := Run(context.Background(), Options{In: in, Out: out, Job: job, Decider: instantDecider{res}})
					peak = max(peak, stop())
					if err != nil || s.Rows != n {
						b.Fatalf("%v, %d rows", err, s.Rows)
					}
					b.StopTimer()
					os.Remove(out)
					b.StartTimer()
				}
				runtime.ReadMemStats(&ms1)
				rows := float64(b.N * n)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/row")
				b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/rows, "allocs/row")
				b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/rows, "B/row")
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			})
		}
	}
}
