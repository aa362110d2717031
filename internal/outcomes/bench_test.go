package outcomes

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/testengine"
)

// benchSizes are the numbers of labelled outcomes BenchmarkCalibrationLog
// logs: SYSTEM1_BENCH_OUTCOMES (comma-separated, such as
// 10000,100000,1000000), else 10,000 alone, so that a plain -bench run
// stays short.
func benchSizes(b *testing.B) []int {
	v := os.Getenv("SYSTEM1_BENCH_OUTCOMES")
	if v == "" {
		return []int{10000}
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("SYSTEM1_BENCH_OUTCOMES: %q is not a count", f)
		}
		out = append(out, n)
	}
	return out
}

// spare is how many answers without an outcome each log holds for the
// feedback batches to report on.
const spare = 20000

// populate logs n answers with an outcome, of three buckets (choices of
// four, nouls, scores of five) over the last six days, and spare answers
// without one, and returns the log and an outcome for each spare one. The
// answers go through the log's writer; the outcomes, a million of which
// would take the feedback path minutes to report one by one, are
// inserted in bulk beside it (db is a second connection to the same
// store).
func populate(b *testing.B, opt decisionlog.Options, db *sql.DB, n int) (*decisionlog.Log, []FeedbackItem) {
	ctx := context.Background()
	opt.Queue, opt.MaxRows, opt.Linger = 10000, int64(n+spare+1), -1
	l, err := decisionlog.Open(ctx, opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close(context.Background()) })
	r := rand.New(rand.NewPCG(uint64(n), 1))
	now := time.Now()
	kinds := []struct {
		kind decision.Kind
		k    int
	}{{decision.Choice, 4}, {decision.Noul, 2}, {decision.Score, 5}}
	var spares []FeedbackItem
	type out struct {
		req, value string
	}
	var outs []out
	for i := range n + spare {
		kd := kinds[i%3]
		d := make([]float64, kd.k)
		var sum float64
		for j := range d {
			d[j] = r.ExpFloat64()
			sum += d[j]
		}
		for j := range d {
			d[j] /= sum
		}
		opts := options(kd.kind, kd.k)
		req := fmt.Sprintf("bench-%d", i)
		l.Record(decisionlog.Record{RequestID: req, QuestionID: "q", Time: now.Add(-time.Duration(r.Int64N(int64(6 * 24 * time.Hour)))),
			Face: decisionlog.FaceSystemOne, Model: "m", Node: "n", Kind: kd.kind, Options: opts, EngineDist: d})
		if i < n {
			outs = append(outs, out{req, opts[r.IntN(kd.k)]})
		} else {
			spares = append(spares, FeedbackItem{RequestID: req, Question: "q", Outcome: json.RawMessage(strconv.Quote(opts[0]))})
		}
		if i%5000 == 4999 {
			if err := l.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := l.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	ph := func(i int) string {
		if opt.URL != "" {
			return "$" + strconv.Itoa(i)
		}
		return "?"
	}
	const rows = 500
	for start := 0; start < len(outs); start += rows {
		chunk := outs[start:min(start+rows, len(outs))]
		var q strings.Builder
		q.WriteString("INSERT INTO outcomes (request_id, question_id, outcome, at_ns) VALUES ")
		args := make([]any, 0, 4*len(chunk))
		for i, o := range chunk {
			if i > 0 {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "(%s,%s,%s,%s)", ph(4*i+1), ph(4*i+2), ph(4*i+3), ph(4*i+4))
			args = append(args, o.req, "q", o.value, now.UnixNano())
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
	return l, spares
}

// benchBackend is a store the benchmarks log to: open gives the log's
// options and a second connection to the same store.
type benchBackend struct {
	name string
	open func(b *testing.B) (decisionlog.Options, *sql.DB)
}

// benchBackends are SQLite, and PostgreSQL where SYSTEM1_POSTGRES_URL
// names one.
func benchBackends() []benchBackend {
	return []benchBackend{
		{"sqlite", func(b *testing.B) (decisionlog.Options, *sql.DB) {
			opt := decisionlog.Options{Path: filepath.Join(b.TempDir(), "decisions.db")}
			// The log makes the file, then a second connection to it.
			l, err := decisionlog.Open(context.Background(), opt)
			if err != nil {
				b.Fatal(err)
			}
			_ = l.Close(context.Background())
			db, err := sql.Open("sqlite", "file:"+opt.Path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return opt, db
		}},
		{"postgres", func(b *testing.B) (decisionlog.Options, *sql.DB) {
			u := testengine.PostgresSchema(b, "bench_")
			db, err := sql.Open("pgx", u)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return decisionlog.Options{URL: u}, db
		}},
	}
}

// BenchmarkFirstRead measures a tracker's first read of a log of n
// labelled outcomes (SYSTEM1_BENCH_OUTCOMES), what a server does once
// after it starts: seed-s in BenchmarkCalibrationLog, here per read
// (ns/op) over several reads of one log.
func BenchmarkFirstRead(b *testing.B) {
	for _, be := range benchBackends() {
		for _, n := range benchSizes(b) {
			b.Run(fmt.Sprintf("%s/%d", be.name, n), func(b *testing.B) {
				opt, db := be.open(b)
				l, _ := populate(b, opt, db, n)
				ctx := context.Background()
				for b.Loop() {
					tr := NewTracker(l)
					if err := tr.Sync(ctx); err != nil {
						b.Fatal(err)
					}
					if got := tr.Cases(); got != n {
						b.Fatalf("the tracker counts %d outcomes of %d", got, n)
					}
				}
			})
		}
	}
}

// BenchmarkCalibrationLog measures the report and feedback paths over a
// decision log of n labelled outcomes (SYSTEM1_BENCH_OUTCOMES), on SQLite
// and on PostgreSQL where SYSTEM1_POSTGRES_URL names one:
//
//   - seed-s: the tracker's first report, which reads every outcome once
//     (what a server does once after it starts);
//   - report: a report of the last seven days after that, the outcomes
//     read since (none) and the statistics added up (ns/op);
//   - feedback: a batch of 100 outcomes recorded (ns/op), then the report
//     that reads them (report-after-ms);
//   - records-s: the same report made as reports were made before the
//     tracker, from every labelled record of the window read and measured
//     (up to 100,000 outcomes; 0 past them).
func BenchmarkCalibrationLog(b *testing.B) {
	for _, be := range benchBackends() {
		for _, n := range benchSizes(b) {
			b.Run(fmt.Sprintf("%s/%d", be.name, n), func(b *testing.B) {
				opt, db := be.open(b)
				start := time.Now()
				l, spares := populate(b, opt, db, n)
				b.Logf("%s, %d outcomes: logged in %.1f s", be.name, n, time.Since(start).Seconds())
				ctx := context.Background()
				window := func() ReportOptions {
					now := time.Now()
					return ReportOptions{Since: now.Add(-7 * 24 * time.Hour), Until: now}
				}
				fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r", Fits: []calibration.Fit{
					{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 1.5}}}
				tr := NewTracker(l)
				t0 := time.Now()
				rep, err := tr.Report(ctx, fits, window())
				seed := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for _, bk := range rep.Buckets {
					got += bk.Outcomes
				}
				if got != n {
					b.Fatalf("the report counts %d outcomes of %d", got, n)
				}
				// The report as it was made before: every labelled record
				// of the window read and measured. Past 100,000 it holds
				// too many records in memory for a shared machine.
				records := time.Duration(0)
				if n <= 100000 {
					t0 = time.Now()
					entries, err := l.WindowLabelled(ctx, window().Since, time.Now(), "")
					if err != nil {
						b.Fatal(err)
					}
					for _, g := range decisionlog.Groups(entries) {
						_ = fitting.Measure(g.Predictions(decisionlog.Entry.Uncalibrated))
					}
					records = time.Since(t0)
				}
				b.Run("report", func(b *testing.B) {
					for b.Loop() {
						if _, err := tr.Report(ctx, fits, window()); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(seed.Seconds(), "seed-s")
					b.ReportMetric(records.Seconds(), "records-s")
					var ms runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&ms)
					b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
				})
				fb := NewFeedback(l)
				next := 0
				var after time.Duration
				batches := 0
				b.Run("feedback", func(b *testing.B) {
					for b.Loop() {
						if next+100 > len(spares) {
							b.Fatal("out of spare answers")
						}
						items := spares[next : next+100]
						next += 100
						if res := fb.Record(ctx, items); res.Error != nil {
							b.Fatal(res.Error.Message)
						}
						b.StopTimer()
						t0 := time.Now()
						if _, err := tr.Report(ctx, fits, window()); err != nil {
							b.Fatal(err)
						}
						after += time.Since(t0)
						batches++
						b.StartTimer()
					}
					b.ReportMetric(float64(after.Milliseconds())/float64(max(batches, 1)), "report-after-ms")
				})
			})
		}
	}
}
