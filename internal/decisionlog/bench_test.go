package decisionlog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkRecord is the cost of Record on the request path. "queued":
// the queue has room (the timer stops while it is flushed every 1<<16
// records), so this is a send; "full": the writer is held and every
// record is dropped and counted. Allocations include the writer's, which
// runs beside the loop.
func BenchmarkRecord(b *testing.B) {
	b.Run("queued", func(b *testing.B) {
		const room = 1 << 16
		l, err := Open(context.Background(), Options{Path: b.TempDir() + "/d.db", Queue: room})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close(context.Background())
		r := sample("req_bench", "q", time.Time{})
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if n++; n%room == 0 {
				b.StopTimer()
				if err := l.Flush(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			l.Record(r)
		}
		b.StopTimer()
		if d := l.Dropped(); d != 0 {
			b.Fatalf("%d dropped", d)
		}
	})
	b.Run("full", func(b *testing.B) {
		l, err := Open(context.Background(), Options{Path: b.TempDir() + "/d.db", Queue: 16, Batch: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close(context.Background())
		conn, err := l.store.db.Conn(context.Background()) // holds the writer
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		r := sample("req_bench", "q", time.Time{})
		for range 64 {
			l.Record(r)
		}
		before := l.Dropped()
		b.ReportAllocs()
		for b.Loop() {
			l.Record(r)
		}
		b.StopTimer()
		// The writer may take one record off the queue late, making room
		// for one more.
		if d := l.Dropped() - before; d+1 < uint64(b.N) {
			b.Fatalf("%d dropped of %d", d, b.N)
		}
	})
}

// BenchmarkRecordParallel is Record from many request goroutines at once.
func BenchmarkRecordParallel(b *testing.B) {
	l, err := Open(context.Background(), Options{Path: b.TempDir() + "/d.db", Queue: DefaultQueue})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(context.Background())
	r := sample("req_bench", "q", time.Time{})
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Record(r)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(l.Dropped())/float64(b.N), "dropped/op")
}

// throughput writes b.N records in chunks the queue holds, flushing after
// each, and reports committed records per second.
func throughput(b *testing.B, opt Options) {
	const chunk = 5000
	opt.Queue = chunk
	l, err := Open(context.Background(), opt)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(context.Background())
	rs := make([]Record, chunk)
	for i := range rs {
		rs[i] = sample(fmt.Sprintf("req_%d", i), "q", t0)
	}
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; done += chunk {
		for i := range min(chunk, b.N-done) {
			l.Record(rs[i])
		}
		if err := l.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	if s := l.Stats(); s.Dropped != 0 || s.Failed != 0 || s.Written != uint64(b.N) {
		b.Fatalf("stats %+v after %d records", s, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
}

func BenchmarkThroughputSQLite(b *testing.B) {
	throughput(b, Options{Path: b.TempDir() + "/d.db"})
}

func BenchmarkThroughputPostgres(b *testing.B) {
	throughput(b, Options{URL: postgresURL(b)})
}
