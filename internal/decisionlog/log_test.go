package decisionlog

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"system1/internal/config"
	"system1/internal/decision"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestRecordRoundTrip(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			for _, keep := range []bool{false, true} {
				l := b.open(t, Options{KeepStates: keep})
				req := fmt.Sprintf("req_keep_%v", keep)
				r := sample(req, "department", t0)
				noMass := sample(req, "urgent", t0.Add(time.Second))
				noMass.Kind, noMass.Options, noMass.EngineDist = decision.Noul, []string{"true", "false"}, []float64{0.7, 0.3}
				noMass.Steps, noMass.LabelMass, noMass.Final = nil, nil, nil
				l.Record(r)
				l.Record(noMass)
				es, err := l.Lookup(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) != 2 {
					t.Fatalf("%d entries, want 2", len(es))
				}
				got := es[0]
				want := r
				want.Final = r.Steps[1].Dist
				want.StateHash = fmt.Sprintf("%x", sha256.Sum256(r.State))
				if !keep {
					want.State = nil
				}
				got.Record.Time = got.Record.Time.UTC()
				if !reflect.DeepEqual(got.Record, want) {
					t.Errorf("keep=%v:\n got %+v\nwant %+v", keep, got.Record, want)
				}
				if got.Outcome != nil || got.Outcomes != 0 {
					t.Errorf("outcome %+v before any was given", got.Outcome)
				}
				if n := es[1]; n.LabelMass != nil || len(n.Steps) != 0 || !reflect.DeepEqual(n.Final, []float64{0.7, 0.3}) {
					t.Errorf("no-mass record read back as %+v", n.Record)
				}
				if s := l.Stats(); s.Written != 2 || s.Dropped != 0 || s.Failed != 0 {
					t.Errorf("stats %+v", s)
				}
			}
		})
	}
}

func TestSQLiteFileSurvivesReopen(t *testing.T) {
	ctx := ctxT(t)
	path := sqlitePath(t)
	l, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		l.Record(sample(fmt.Sprintf("req_%d", i), "department", t0.Add(time.Duration(i)*time.Second)))
	}
	if _, err := l.Outcome(ctx, "req_7", "department", "sales"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(ctx, Options{Path: path, Now: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close(ctx)
	all, err := l2.Window(ctx, t0, t0.Add(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 100 {
		t.Fatalf("%d records after reopening, want 100", len(all))
	}
	es, err := l2.Lookup(ctx, "req_7")
	if err != nil || len(es) != 1 || es[0].Outcome == nil || es[0].Outcome.Value != "sales" {
		t.Fatalf("req_7 after reopening: %+v, %v", es, err)
	}
	var mode string
	if err := l2.store.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q, %v; want wal", mode, err)
	}
	var cache int
	if err := l2.store.db.QueryRow("PRAGMA cache_size").Scan(&cache); err != nil || cache != -512 {
		t.Errorf("cache_size %d, %v; want -512 (KiB)", cache, err)
	}
}

func TestOutcomesLatestWinsEarlierKept(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			clock := t0
			var mu sync.Mutex
			now := func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Second); return clock }
			l := b.open(t, Options{Now: now})
			l.Record(sample("req_1", "department", t0))
			for _, o := range []string{"technical", "sales", "billing"} {
				if _, err := l.Outcome(ctx, "req_1", "department", o); err != nil {
					t.Fatal(err)
				}
			}
			e, err := l.Outcome(ctx, "req_1", "department", "sales")
			if err != nil {
				t.Fatal(err)
			}
			if e.Outcome.Value != "sales" || e.Outcomes != 4 {
				t.Errorf("returned %+v, %d outcomes", e.Outcome, e.Outcomes)
			}
			es, err := l.Lookup(ctx, "req_1")
			if err != nil {
				t.Fatal(err)
			}
			if es[0].Outcome == nil || es[0].Outcome.Value != "sales" || es[0].Outcomes != 4 {
				t.Errorf("stored latest %+v of %d", es[0].Outcome, es[0].Outcomes)
			}
			if n := count(t, l, "outcomes"); n != 4 {
				t.Errorf("%d outcome rows, want all 4 kept", n)
			}
		})
	}
}

func TestOutcomeErrors(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			l.Record(sample("req_two", "department", t0))
			urgent := sample("req_two", "urgent", t0)
			urgent.Kind, urgent.Options = decision.Noul, []string{"true", "false"}
			l.Record(urgent)
			decide := sample("req_decide", DecideQuestion, t0)
			decide.Face = FaceDecide
			l.Record(decide)
			for _, c := range []struct {
				name, req, q, outcome string
				want                  error
			}{
				{"unknown request", "req_nope", "department", "sales", ErrUnknownRequest},
				{"empty request id", "", "", "sales", ErrUnknownRequest},
				{"unknown question", "req_two", "colour", "sales", ErrUnknownQuestion},
				{"question left out of a two-question request", "req_two", "", "sales", ErrQuestionRequired},
				{"not an option", "req_two", "department", "marketing", ErrBadOutcome},
				{"a noul's outcome is true or false", "req_two", "urgent", "yes", ErrBadOutcome},
				{"case matters", "req_two", "department", "Sales", ErrBadOutcome},
				{"a choice key", "req_two", "department", "sales", nil},
				{"a noul", "req_two", "urgent", "false", nil},
				{"decide without a question id", "req_decide", "", "technical", nil},
				{"decide by its id", "req_decide", DecideQuestion, "billing", nil},
				{"a choice none of whose options fit", "req_two", "department", NoneFit, nil},
				{"a noul has no none", "req_two", "urgent", NoneFit, ErrBadOutcome},
			} {
				_, err := l.Outcome(ctx, c.req, c.q, c.outcome)
				if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
				var oe *OutcomeError
				if errors.As(err, &oe) && (oe.Outcome != c.outcome || len(oe.Options) == 0) {
					t.Errorf("%s: %+v", c.name, oe)
				}
			}
			if n := count(t, l, "outcomes"); n != 5 {
				t.Errorf("%d outcome rows, want the 5 valid ones", n)
			}
		})
	}
}

// holdWriter takes the SQLite log's only connection, so the writer blocks
// at its next transaction until release is called.
func holdWriter(t *testing.T, l *Log) (release func()) {
	t.Helper()
	conn, err := l.store.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { conn.Close() }) }
	t.Cleanup(release)
	return release
}

func TestQueueFullDropsAreCountedAndRecordNeverBlocks(t *testing.T) {
	ctx := ctxT(t)
	l := openLog(t, Options{Path: sqlitePath(t), Queue: 4, Batch: 1})
	release := holdWriter(t, l)
	const total = 1000
	// The writer can hold one record (Batch) while it waits for the
	// connection; the queue four. Every other Record must return at once
	// and count its drop: if Record blocked, this loop would never end.
	for i := range total {
		l.Record(sample(fmt.Sprintf("req_%d", i), "q", t0))
	}
	if d := l.Dropped(); d < total-5 {
		t.Fatalf("%d dropped of %d with room for 5", d, total)
	}
	release()
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s := l.Stats()
	if s.Written+s.Dropped != total || s.Written == 0 || s.Failed != 0 {
		t.Fatalf("stats %+v: written and dropped must add up to %d", s, total)
	}
	if n := count(t, l, "decisions"); uint64(n) != s.Written {
		t.Fatalf("%d rows, %d counted written", n, s.Written)
	}
}

func TestCloseDrainsWithinItsDeadline(t *testing.T) {
	t.Run("in time", func(t *testing.T) {
		path := sqlitePath(t)
		l, err := Open(context.Background(), Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5000 {
			l.Record(sample(fmt.Sprintf("req_%d", i), "q", t0))
		}
		if err := l.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		l.Record(sample("late", "q", t0))
		if s := l.Stats(); s.Written != 5000 || s.Dropped != 1 {
			t.Fatalf("stats %+v: want 5000 written and the record after Close dropped", s)
		}
	})
	t.Run("past the deadline", func(t *testing.T) {
		l, err := Open(context.Background(), Options{Path: sqlitePath(t), Batch: 1})
		if err != nil {
			t.Fatal(err)
		}
		release := holdWriter(t, l)
		for i := range 100 {
			l.Record(sample(fmt.Sprintf("req_%d", i), "q", t0))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- l.Close(ctx) }()
		err = <-done // the writer's transaction is cancelled at the deadline
		release()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close: %v, want the deadline", err)
		}
		if s := l.Stats(); s.Written+s.Dropped+s.Failed != 100 {
			t.Fatalf("stats %+v do not account for 100 records", s)
		}
	})
}

// A prune the database does not answer (here its one connection is
// held) is given up when the log closes, as the write in flight is, so
// Close keeps its deadline: serve's shutdown gives the log 10 s, and a
// prune that held Close outlived the pod's grace period.
func TestClosingEndsAPruneInProgress(t *testing.T) {
	l, err := Open(context.Background(), Options{Path: sqlitePath(t), PruneEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, l)
	// The writer is in a prune once it answers no flush: nothing is
	// queued, so a flush needs no connection.
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := l.Flush(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	l.Record(sample("req_0", "q", t0))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Close(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close: %v, want the deadline", err)
		}
	case <-time.After(10 * time.Second):
		release()
		<-done
		t.Fatal("Close waited for the prune 10 s past its deadline of 100 ms")
	}
	if s := l.Stats(); s.Written+s.Dropped+s.Failed != 1 {
		t.Fatalf("stats %+v do not account for the record", s)
	}
}

func TestRetentionAndRowBound(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			now := t0.Add(40 * 24 * time.Hour)
			l := b.open(t, Options{Retention: 30 * 24 * time.Hour, MaxRows: 5, Now: func() time.Time { return now }})
			for i := range 10 {
				// req_0..req_2 are older than 30 days.
				l.Record(sample(fmt.Sprintf("req_%d", i), "q", t0.Add(time.Duration(i)*4*24*time.Hour)))
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.store.addOutcomes(ctx, []Checked{{Entry: Entry{Record: Record{RequestID: "req_0", QuestionID: "q"}}, Outcome: "sales"}}, t0); err != nil {
				t.Fatal(err)
			}
			n, err := l.Prune(ctx)
			if err != nil {
				t.Fatal(err)
			}
			es, err := l.Window(ctx, time.Time{}, now, "")
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range es {
				ids = append(ids, e.RequestID)
			}
			want := []string{"req_5", "req_6", "req_7", "req_8", "req_9"}
			if n != 5 || !reflect.DeepEqual(ids, want) {
				t.Fatalf("pruned %d, kept %v; want 5 pruned, kept %v", n, ids, want)
			}
			if c := count(t, l, "outcomes"); c != 0 {
				t.Errorf("%d old outcomes kept", c)
			}
		})
	}
}

func TestWindowGroupsAndPredictions(t *testing.T) {
	ctx := ctxT(t)
	l := openLog(t, Options{Path: sqlitePath(t)})
	add := func(req, model string, kind decision.Kind, options int, at time.Time, outcome string) {
		r := sample(req, "q", at)
		r.Model, r.Kind = model, kind
		r.Options, r.EngineDist = nil, nil
		for i := range options {
			r.Options = append(r.Options, fmt.Sprint(i))
			r.EngineDist = append(r.EngineDist, 1/float64(options))
		}
		r.Steps = []Step{{Name: decision.StepTemperature, Version: "v1", Dist: r.EngineDist}}
		l.Record(r)
		if outcome != "" {
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Outcome(ctx, req, "q", outcome); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("a", "m2", decision.Choice, 3, t0, "1")
	add("b", "m1", decision.Score, 5, t0, "4")
	add("c", "m1", decision.Choice, 12, t0, "0")
	add("d", "m1", decision.Choice, 4, t0, "2")
	add("e", "m1", decision.Choice, 3, t0, "")                  // no outcome: left out
	add("f", "m1", decision.Choice, 3, t0.Add(-time.Hour), "0") // outside the window
	add("g", "m1", decision.Choice, 3, t0, NoneFit)             // no option fit: no prediction
	es, err := l.Window(ctx, t0, t0.Add(time.Minute), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 6 {
		t.Fatalf("%d in the window, want 6", len(es))
	}
	for _, e := range es {
		if e.NoOptionFit() != (e.RequestID == "g") {
			t.Errorf("%s: no option fit %v (outcome %+v)", e.RequestID, e.NoOptionFit(), e.Outcome)
		}
	}
	var got []string
	for _, g := range Groups(es) {
		got = append(got, fmt.Sprintf("%s/%s/%s:%d", g.Model, g.Kind, g.Bucket, len(g.Entries)))
	}
	want := []string{"m1/choice/3-4:1", "m1/choice/11-20:1", "m1/score/5-10:1", "m2/choice/3-4:1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	gs, err := l.Labelled(ctx, t0, t0.Add(time.Minute), "m1")
	if err != nil || len(gs) != 3 {
		t.Fatalf("m1 groups %v, %v", gs, err)
	}
	ps := gs[2].Predictions(Entry.Uncalibrated)
	if len(ps) != 1 || ps[0].Expected != 4 || ps[0].Options != 5 || ps[0].Kind != decision.Score || ps[0].Check() != nil {
		t.Fatalf("score prediction %+v", ps)
	}
}

func TestUncalibratedIsBeforeTheTemperatureStep(t *testing.T) {
	e := Entry{Record: sample("r", "q", t0)}
	if got := e.Uncalibrated(); !reflect.DeepEqual(got, []float64{0.4, 0.35, 0.25}) {
		t.Errorf("before temperature %v, want the debiased distribution", got)
	}
	e.Steps = e.Steps[:1]
	if got := e.Uncalibrated(); !reflect.DeepEqual(got, []float64{0.4, 0.35, 0.25}) {
		t.Errorf("without temperature %v, want the last step's", got)
	}
	e.Steps = nil
	if got := e.Uncalibrated(); !reflect.DeepEqual(got, e.EngineDist) {
		t.Errorf("without steps %v, want the engine's", got)
	}
}

func TestNonFiniteRecordIsLeftOutNotTheBatch(t *testing.T) {
	ctx := ctxT(t)
	l := openLog(t, Options{Path: sqlitePath(t)})
	bad := sample("bad", "q", t0)
	bad.EngineDist = []float64{nan(), 0.5, 0.5}
	l.Record(sample("good1", "q", t0))
	l.Record(bad)
	l.Record(sample("good2", "q", t0))
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Written != 2 || s.Failed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestFailedInsertFailsItsBatchOnly is a batch whose INSERT fails midway
// on SQLite, which the writer's INSERT OR ROLLBACK ends by rolling its
// transaction back: none of the batch is stored, every one of its records
// is counted as failed, and the next batch is written.
func TestFailedInsertFailsItsBatchOnly(t *testing.T) {
	for _, raise := range []string{"ABORT", "ROLLBACK"} {
		t.Run(raise, func(t *testing.T) {
			ctx := ctxT(t)
			l := openLog(t, Options{Path: sqlitePath(t), Linger: -1})
			// A temporary trigger lives on the log's one connection only.
			if _, err := l.store.db.ExecContext(ctx, "CREATE TEMP TRIGGER refuse BEFORE INSERT ON main.decisions"+
				" WHEN NEW.request_id = 'bad' BEGIN SELECT RAISE("+raise+", 'refused'); END"); err != nil {
				t.Fatal(err)
			}
			var batch []Record
			for i := range 100 { // 102 records: INSERTs of 64, 32, 4 and 2 rows
				batch = append(batch, sample(fmt.Sprintf("good%d", i), "q", t0))
			}
			batch = append(batch, sample("bad", "q", t0), sample("good", "q", t0))
			if err := l.write(ctx, batch); err == nil {
				t.Fatal("the batch was written")
			}
			if err := l.write(ctx, []Record{sample("after1", "q", t0), sample("after2", "q", t0)}); err != nil {
				t.Fatal(err)
			}
			if s := l.Stats(); s.Written != 2 || s.Failed != uint64(len(batch)) {
				t.Fatalf("stats %+v", s)
			}
			if n := count(t, l, "decisions"); n != 2 {
				t.Fatalf("%d rows stored, want the second batch's 2", n)
			}
		})
	}
}

func nan() float64 { var z float64; return z / z }

// A caller's id with a NUL in it (decide's request_id "a\u0000b", a
// question id) is a text PostgreSQL cannot store: that record is left out
// and counted as failed there, as a NaN is, and the rest of its batch,
// other callers' answers, is written. SQLite stores it.
func TestNULRecordIsLeftOutNotTheBatch(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{Linger: time.Hour, KeepStates: true})
			q := &decision.Question{ID: "q", Kind: decision.Choice, Instructions: json.RawMessage(`"Which team?"`)}
			for _, id := range [][2]string{{"good1", "q"}, {"bad\x00id", "q"}, {"good2", "q\x00x"}, {"good3", "q"}} {
				r := sample(id[0], id[1], t0)
				r.Question = q
				l.Record(r)
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			want := Stats{Written: 4}
			if b.name == "postgres" {
				want = Stats{Written: 2, Failed: 2}
			}
			if s := l.Stats(); s != want {
				t.Errorf("stats %+v; want %+v", s, want)
			}
			for _, id := range []string{"good1", "good3"} {
				if es, err := l.Lookup(ctx, id); err != nil || len(es) != 1 {
					t.Errorf("%s: %d records, %v; want its one record", id, len(es), err)
				}
			}
		})
	}
}

// A question id longer than PostgreSQL's index on the ids can hold (its
// entries are at most 2,704 bytes) is left out there and counted as
// failed, as a NUL is, and the rest of its batch, other callers' answers,
// is written, where the index's error failed the whole batch. SQLite
// stores it.
func TestLongIDRecordIsLeftOutNotTheBatch(t *testing.T) {
	var sb strings.Builder // 8,000 bytes that do not compress
	for i := range 125 {
		fmt.Fprintf(&sb, "%x", sha256.Sum256([]byte{byte(i)}))
	}
	long := sb.String()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{Linger: time.Hour, KeepStates: true})
			q := &decision.Question{ID: "q", Kind: decision.Choice, Instructions: json.RawMessage(`"Which team?"`)}
			for _, id := range [][2]string{{"good1", "q"}, {"long", long}, {"good3", "q"}} {
				r := sample(id[0], id[1], t0)
				r.Question = q
				l.Record(r)
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			want := Stats{Written: 3}
			if b.name == "postgres" {
				want = Stats{Written: 2, Failed: 1}
			}
			if s := l.Stats(); s != want {
				t.Errorf("stats %+v; want %+v", s, want)
			}
			for _, id := range []string{"good1", "good3"} {
				if es, err := l.Lookup(ctx, id); err != nil || len(es) != 1 {
					t.Errorf("%s: %d records, %v; want its one record", id, len(es), err)
				}
			}
		})
	}
}

func TestNilLogIsOff(t *testing.T) {
	var l *Log
	l.Record(sample("r", "q", t0))
	if l.Dropped() != 0 || l.Stats() != (Stats{}) {
		t.Fatal("a nil log counted something")
	}
}

func TestOpenNeedsOneStore(t *testing.T) {
	for _, opt := range []Options{{}, {Path: "x.db", URL: "postgres://h/db"}} {
		if _, err := Open(context.Background(), opt); err == nil {
			t.Errorf("Open(%+v) succeeded", opt)
		}
	}
	_, err := Open(context.Background(), Options{URL: "postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=1"})
	if err == nil {
		t.Fatal("connected to nothing")
	}
	if b, _ := json.Marshal(err.Error()); containsSecret(string(b)) {
		t.Errorf("error repeats the password: %v", err)
	}
}

func containsSecret(s string) bool {
	for i := 0; i+6 <= len(s); i++ {
		if s[i:i+6] == "s3cret" {
			return true
		}
	}
	return false
}

func TestOptionsFromConfig(t *testing.T) {
	c, err := config.Parse([]byte("decision_log: {retention: 7d, queue: 50, keep_states: true, max_rows: 9}"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opt, err := OptionsFrom(c.DecisionLog, dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Path: filepath.Join(dir, config.DefaultDecisionLogFile), KeepStates: true, Retention: 7 * 24 * time.Hour, Queue: 50, MaxRows: 9}
	if !reflect.DeepEqual(opt, want) {
		t.Fatalf("%+v, want %+v", opt, want)
	}
	l := openLog(t, opt)
	l.Record(sample("r", "q", t0))
	if es, err := l.Lookup(ctxT(t), "r"); err != nil || len(es) != 1 {
		t.Fatalf("%v %v", es, err)
	}
	if pg, err := OptionsFrom(config.DecisionLog{URL: "postgres://h/db"}, dir, nil); err != nil || pg.URL != "postgres://h/db" || pg.Path != "" {
		t.Fatalf("%+v %v", pg, err)
	}
	// url_env: the variable's URL, never a file of this replica's own
	// when it is empty.
	env := map[string]string{"PG_URL": "postgres://u:s3cret@db:5432/x"}
	getenv := func(k string) string { return env[k] }
	if pg, err := OptionsFrom(config.DecisionLog{URLEnv: "PG_URL"}, dir, getenv); err != nil || pg.URL != env["PG_URL"] || pg.Path != "" {
		t.Fatalf("url_env: %+v %v", pg, err)
	}
	if pg, err := OptionsFrom(config.DecisionLog{URLEnv: "UNSET"}, dir, getenv); err == nil || pg.Path != "" {
		t.Fatalf("url_env naming an unset variable: %+v %v", pg, err)
	}
}

func TestParseOutcome(t *testing.T) {
	for _, c := range []struct {
		in, want string
		bad      bool
	}{
		{`"billing"`, "billing", false},
		{`true`, "true", false},
		{`false`, "false", false},
		{`2`, "2", false},
		{`0`, "0", false},
		{`"2"`, "2", false},
		{`2.5`, "", true},
		{`-1`, "", true},
		{`null`, "", true},
		{`["a"]`, "", true},
		{`{"a":1}`, "", true},
		{`tru`, "", true},
	} {
		got, err := ParseOutcome(json.RawMessage(c.in))
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%s: %q, %v", c.in, got, err)
		}
		// The face names the field (param outcome, or outcomes.1.outcome).
		if err != nil && strings.HasPrefix(err.Error(), "outcome") {
			t.Errorf("%s: %v names outcome itself, which its face names again", c.in, err)
		}
	}
}

// A number too large for a float64 is valid JSON: it is refused as not a
// level, not as not JSON.
func TestParseOutcomeHugeNumberIsNotALevel(t *testing.T) {
	for _, in := range []string{`1e400`, `-1e400`, ` 1e400 `} {
		_, err := ParseOutcome(json.RawMessage(in))
		if err == nil || !strings.Contains(err.Error(), "not a level") || strings.Contains(err.Error(), "not JSON") {
			t.Errorf("%s: %v", in, err)
		}
	}
}

// The drop counter is readable by a Prometheus metric without a global
// registry: a CounterFunc over Dropped.
func TestDroppedFeedsAPrometheusCounter(t *testing.T) {
	l := openLog(t, Options{Path: sqlitePath(t), Queue: 1, Batch: 1})
	release := holdWriter(t, l)
	defer release()
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "system1_decision_log_dropped_total", Help: "Records dropped."},
		func() float64 { return float64(l.Dropped()) })
	reg := prometheus.NewRegistry()
	reg.MustRegister(dropped)
	for range 50 {
		l.Record(sample("r", "q", t0))
	}
	got := testutil.ToFloat64(dropped)
	if got < 48 {
		t.Fatalf("counter %v after 50 records with room for 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "system1_decision_log_dropped_total"); err != nil || n != 1 {
		t.Fatalf("gathered %d, %v", n, err)
	}
}

// WindowLabelled is the part of Window that has an outcome, on every
// backend: once per question whatever the number of outcomes, with the
// latest, in record order, within the window and the model asked.
func TestWindowLabelledIsTheLabelledPart(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			for i, at := range []time.Time{t0, t0.Add(time.Second), t0.Add(-time.Hour), t0.Add(2 * time.Second)} {
				for j, model := range []string{"m1", "m2"} {
					r := sample(fmt.Sprintf("r%d-%d", i, j), "q", at)
					r.Model = model
					l.Record(r)
				}
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, o := range []struct{ req, value string }{{"r0-0", "billing"}, {"r0-0", "sales"}, {"r1-1", "billing"}, {"r2-0", "billing"}, {"r3-0", "technical"}} {
				if _, err := l.Outcome(ctx, o.req, "q", o.value); err != nil {
					t.Fatal(err)
				}
			}
			for _, model := range []string{"", "m1"} {
				all, err := l.Window(ctx, t0, t0.Add(time.Minute), model)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, e := range all {
					if e.Outcome != nil {
						want = append(want, e.RequestID+"="+e.Outcome.Value)
					}
				}
				es, err := l.WindowLabelled(ctx, t0, t0.Add(time.Minute), model)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range es {
					if e.Outcome == nil {
						t.Fatalf("model %q: %s has no outcome", model, e.RequestID)
					}
					got = append(got, e.RequestID+"="+e.Outcome.Value)
				}
				if len(want) == 0 || !reflect.DeepEqual(got, want) {
					t.Errorf("model %q: labelled %v, want %v", model, got, want)
				}
			}
		})
	}
}

// The writer lingers after a record for others to share its transaction,
// without waking for each; a Flush, a whole batch queued or Close ends
// the wait at once. With an hour's linger each would otherwise wait an
// hour.
func TestLingerEndsEarly(t *testing.T) {
	t.Run("flush", func(t *testing.T) {
		l := openLog(t, Options{Path: sqlitePath(t), Linger: time.Hour})
		l.Record(sample("req_1", "q", t0))
		for l.Stats().Queued > 0 {
			time.Sleep(time.Millisecond) // until the writer has it, and lingers
		}
		l.Record(sample("req_2", "q", t0))
		if err := l.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if s := l.Stats(); s.Written != 2 {
			t.Fatalf("stats %+v after Flush", s)
		}
	})
	t.Run("a whole batch", func(t *testing.T) {
		// However the writer splits a batch between what it took and
		// what is queued after, the batch ends the linger: twice, so a
		// signal left from the first is not taken for the second.
		const batch = 8
		l := openLog(t, Options{Path: sqlitePath(t), Linger: time.Hour, Batch: batch})
		ctx := ctxT(t)
		for round := 1; round <= 2; round++ {
			for i := range batch {
				l.Record(sample(fmt.Sprintf("req_%d_%d", round, i), "q", t0))
			}
			for l.Stats().Written != uint64(round*batch) {
				select {
				case <-ctx.Done():
					t.Fatalf("round %d: stats %+v: a whole batch lingered", round, l.Stats())
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	})
	t.Run("close", func(t *testing.T) {
		l, err := Open(context.Background(), Options{Path: sqlitePath(t), Linger: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		l.Record(sample("req_1", "q", t0))
		if err := l.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if s := l.Stats(); s.Written != 1 {
			t.Fatalf("stats %+v after Close", s)
		}
	})
}

// A batch is encoded into one buffer: each record's columns are its own,
// a state shared by a request's records is hashed once, and a record left
// out for a NaN does not shift those after it.
func TestBatchEncodesEachRecord(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{KeepStates: true})
			shared := json.RawMessage(`{"ticket":"one"}`)
			other := json.RawMessage(`{"ticket":"two"}`) // as long as shared
			mk := func(id, q string, state json.RawMessage, dist []float64) Record {
				r := sample(id, q, t0)
				r.State, r.EngineDist, r.Steps, r.Final = state, dist, nil, nil
				return r
			}
			bad := mk("req_bad", "q", shared, []float64{nan(), 0.5, 0.5})
			preset := mk("req_preset", "q", shared, []float64{0.1, 0.1, 0.8})
			preset.StateHash = "given"
			recs := []Record{
				mk("req_a", "q1", shared, []float64{0.5, 0.3, 0.2}),
				mk("req_a", "q2", shared, []float64{0.2, 0.3, 0.5}),
				bad,
				mk("req_b", "q1", other, []float64{0.6, 0.2, 0.2}),
				preset,
				mk("req_c", "q1", shared, []float64{0.25, 0.25, 0.5}),
				mk("req_d", "q1", nil, []float64{1, 0, 0}),
			}
			n, err := l.store.insert(ctx, recs, true)
			if n != 1 || err != nil {
				t.Fatalf("%d left out, %v; want the NaN one", n, err)
			}
			for _, r := range recs {
				if r.RequestID == "req_bad" {
					continue
				}
				es, err := l.Lookup(ctx, r.RequestID)
				if err != nil {
					t.Fatal(err)
				}
				var e *Entry
				for i := range es {
					if es[i].QuestionID == r.QuestionID {
						e = &es[i]
					}
				}
				want := r.StateHash
				if want == "" {
					want = fmt.Sprintf("%x", sha256.Sum256(r.State))
				}
				if e == nil || e.StateHash != want || string(e.State) != string(r.State) ||
					!reflect.DeepEqual(e.EngineDist, r.EngineDist) || !reflect.DeepEqual(e.Final, r.EngineDist) ||
					!reflect.DeepEqual(e.Options, r.Options) {
					t.Errorf("%s %s read back as %+v", r.RequestID, r.QuestionID, e)
				}
			}
		})
	}
}

// TestRecordRacingCloseIsAccounted: a record given while the log closes
// (its Record past the closed check when Close begins) is written or
// counted dropped, never left in the queue, acknowledged and uncounted.
func TestRecordRacingCloseIsAccounted(t *testing.T) {
	l, err := Open(context.Background(), Options{Path: sqlitePath(t)})
	if err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	// The spend's callback runs inside Record, after its closed check:
	// it holds the Record there while Close runs.
	if _, err := l.Spend(ctxT(t), map[string]Period{"k": PerDay}, func(string, float64) {
		close(inside)
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	r := sample("req_racing", "q", t0)
	r.Key, r.Cost = "k", new(decision.USD(1))
	done := make(chan struct{})
	go func() { defer close(done); l.Record(r) }()
	<-inside
	if err := l.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
	if s := l.Stats(); s.Written+s.Dropped+s.Failed != 1 || s.Queued != 0 {
		t.Fatalf("stats %+v do not account for the record given while the log closed", s)
	}
}
