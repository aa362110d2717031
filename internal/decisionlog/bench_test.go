package decisionlog

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"system1/internal/decision"
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

// BenchmarkInsert is the writer's work per record, without the queue: the
// records of one request after another (two questions over one state, ids
// in time order as gateway.NewRequestID makes them) written in
// transactions of a batch each, as the writer does under load. ns/op and
// allocs/op are per record; cpu-ns/op is the process's CPU time (user and
// system, collection included) per record, which the machine's other load
// changes less than the time.
func BenchmarkInsert(b *testing.B) {
	for _, batch := range []int{2, 16, 64, 512, 2048} {
		b.Run(fmt.Sprintf("sqlite/batch=%d", batch), func(b *testing.B) {
			s, err := openSQLite(context.Background(), b.TempDir()+"/d.db")
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			insertBench(b, s, batch)
		})
	}
	b.Run("postgres/batch=512", func(b *testing.B) {
		s, err := openPostgres(context.Background(), postgresURL(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.close()
		insertBench(b, s, 512)
	})
}

func insertBench(b *testing.B, s *store, batch int) {
	// Ids for this many records are made before the timer starts; past
	// them they repeat.
	const ids = 1 << 17
	recs := make([]Record, ids)
	state := []byte(`{"ticket":"I was charged twice for my subscription and want a refund."}`)
	for i := range recs {
		recs[i] = sample(fmt.Sprintf("req_%012x%020x", 1<<40+i/2, i/2), []string{"dept", "urgent"}[i%2], t0.Add(time.Duration(i)*time.Millisecond))
		recs[i].State = state
	}
	b.ReportAllocs()
	cpu := cpuTime()
	n := 0
	for b.Loop() {
		if n++; n%batch == 0 {
			at := (n - batch) % ids
			if bad, err := s.insert(context.Background(), recs[at:at+batch], false); err != nil || bad != 0 {
				b.Fatal(bad, err)
			}
		}
	}
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplayRead is what system1 replay reads of a log of 50,000
// requests (two questions over one kept state each) to ask 1,000
// questions: the window whole, as it read before Replayable (the records
// alone, without their questions), against one page of the latest 1,000
// requests with their questions.
func BenchmarkReplayRead(b *testing.B) {
	ctx := context.Background()
	l, err := Open(ctx, Options{Path: b.TempDir() + "/d.db", KeepStates: true, Linger: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(ctx)
	q := decision.Question{ID: "q", Kind: decision.Choice, Instructions: json.RawMessage(`"Which team?"`), Options: []decision.Option{{Key: "billing", Name: "billing"}, {Key: "technical", Name: "technical"}}}
	state := json.RawMessage(`{"ticket":"I was charged twice for my subscription and want a refund, please look into it today."}`)
	const requests = 50_000
	for i := range requests {
		for _, qid := range []string{"dept", "urgent"} {
			r := sample(fmt.Sprintf("req_%012x%020x", 1<<40+i, i), qid, t0.Add(time.Duration(i)*time.Millisecond))
			r.State, r.Question = state, &q
			l.Record(r)
		}
		if i%500 == 0 { // the queue holds what is written, none dropped
			if err := l.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := l.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	until := t0.Add(time.Hour)
	b.Run("window", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if es, err := l.Window(ctx, t0, until, ""); err != nil || len(es) != 2*requests {
				b.Fatal(len(es), err)
			}
		}
	})
	b.Run("latest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if es, qs, _, err := l.Replayable(ctx, t0, until, "cand", 0, 1000); err != nil || len(es) != 2000 || len(qs) != 2000 {
				b.Fatal(len(es), len(qs), err)
			}
		}
	})
}
