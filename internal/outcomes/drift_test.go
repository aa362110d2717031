package outcomes

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/testengine"
)

// reportDriftFull is the drift report as it was made before the
// histograms were kept: every record of both windows read whole, with
// windows exact to the nanosecond. The incremental report is held to it.
func reportDriftFull(ctx context.Context, log *decisionlog.Log, until time.Time, opt DriftOptions) ([]SignatureDrift, error) {
	opt = opt.withDefaults()
	cut := until.Add(-opt.Window)
	es, err := log.Window(ctx, cut.Add(-opt.Reference), until.Add(time.Nanosecond), "")
	if err != nil {
		return nil, err
	}
	type sides struct {
		kind     decision.Kind
		options  []string
		ref, cur fitting.DriftHistogram
	}
	type answer struct {
		e *decisionlog.Entry
		k driftKey
		a fitting.Answer
	}
	var as []answer
	// A minute counts the least driftSignaturesMost signatures answered
	// in it.
	keys := map[int64]map[driftKey]struct{}{}
	for i := range es {
		e := &es[i]
		if e.Face == decisionlog.FaceShadow {
			continue
		}
		a, ok := fitting.AnswerOf(calibration.Prediction{Kind: e.Kind, Dist: e.Uncalibrated(), Options: len(e.Options)})
		if !ok {
			continue
		}
		k := driftKey{e.Model, Signature(e.Kind, e.Options)}
		as = append(as, answer{e, k, a})
		si := slotOf(e.Time.UnixNano())
		if keys[si] == nil {
			keys[si] = map[driftKey]struct{}{}
		}
		keys[si][k] = struct{}{}
	}
	least := map[int64][]driftKey{}
	for si, ks := range keys {
		least[si] = slices.SortedFunc(maps.Keys(ks), driftKey.compare)[:min(len(ks), driftSignaturesMost)]
	}
	by := map[driftKey]*sides{}
	for _, x := range as {
		e, k, a := x.e, x.k, x.a
		if !slices.Contains(least[slotOf(e.Time.UnixNano())], k) {
			continue
		}
		s := by[k]
		if s == nil {
			s = &sides{kind: e.Kind, options: e.Options}
			by[k] = s
		}
		if e.Time.Before(cut) {
			s.ref.Add(a)
		} else {
			s.cur.Add(a)
		}
	}
	out := make([]SignatureDrift, 0, len(by))
	for k, s := range by {
		d := fitting.MeasureDriftOf(s.ref, s.cur, opt.Threshold)
		out = append(out, SignatureDrift{Model: k.model, Signature: k.sig, Kind: s.kind, Options: s.options, PSI: d.PSI(), Drift: d})
	}
	slices.SortFunc(out, func(a, b SignatureDrift) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Signature, b.Signature))
	})
	return out, nil
}

// driftStores are the stores the drift tests run on.
var driftStores = []struct {
	name string
	opt  func(t *testing.T) decisionlog.Options
}{
	{"sqlite", func(t *testing.T) decisionlog.Options {
		return decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db")}
	}},
	{"postgres", func(t *testing.T) decisionlog.Options {
		return decisionlog.Options{URL: testengine.PostgresSchema(t, "d_")}
	}},
}

// logAnswers records n answers of two models and three signatures at
// times drawn by at, some through steps (the distribution answered is
// the last), some shadow answers, and some whose distribution does not
// fit the options (left out), and waits for them to be written.
func logAnswers(t *testing.T, l *decisionlog.Log, r *rand.Rand, n int, at func(i int) time.Time) {
	t.Helper()
	kinds := []struct {
		kind decision.Kind
		k    int
	}{{decision.Choice, 4}, {decision.Noul, 2}, {decision.Score, 5}}
	for i := range n {
		kd := kinds[r.IntN(len(kinds))]
		d := make([]float64, kd.k)
		var sum float64
		for j := range d {
			d[j] = r.ExpFloat64() * float64(1+j*r.IntN(3))
			sum += d[j]
		}
		for j := range d {
			d[j] /= sum
		}
		rec := decisionlog.Record{RequestID: fmt.Sprintf("r-%d-%d", i, r.Uint64()), QuestionID: "q", Time: at(i),
			Face: decisionlog.FaceSystemOne, Model: []string{"a", "b"}[r.IntN(2)], Node: "n", Kind: kd.kind, Options: options(kd.kind, kd.k), EngineDist: d}
		switch r.IntN(10) {
		case 0:
			rec.Face = decisionlog.FaceShadow
		case 1:
			rec.EngineDist = d[:len(d)-1] // fits no option count
		case 2, 3:
			sharp := softmax(d, 3)
			rec.Steps = []decision.Step{{Name: decision.StepTemperature, Version: "v", Dist: sharp}}
		}
		l.Record(rec)
	}
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// checkDrift holds the tracker's drift report at until to the full
// read's, and returns it.
func checkDrift(t *testing.T, tr *Tracker, l *decisionlog.Log, what string, until time.Time, do DriftOptions) []SignatureDrift {
	t.Helper()
	rep, err := tr.Report(t.Context(), nil, ReportOptions{Since: until.Add(-time.Hour), Until: until, Drift: do})
	if err != nil {
		t.Fatal(err)
	}
	want, err := reportDriftFull(t.Context(), l, until, do)
	if err != nil {
		t.Fatal(err)
	}
	sameDrift(t, what, rep.Drift, want)
	return rep.Drift
}

// sameDrift fails unless got is want, but for the mean confidences,
// which add up by slot in another order: to 1e-12.
func sameDrift(t *testing.T, what string, got, want []SignatureDrift) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d signatures, the full read %d:\n%+v\n%+v", what, len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		for j := range g.MeanConfidence {
			if math.Abs(g.MeanConfidence[j]-w.MeanConfidence[j]) > 1e-12 {
				t.Fatalf("%s: %s %s mean confidence %v, the full read %v", what, g.Model, g.Signature, g.MeanConfidence, w.MeanConfidence)
			}
		}
		g.MeanConfidence = w.MeanConfidence
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: %s %s\n got %+v\nwant %+v", what, g.Model, g.Signature, g, w)
		}
	}
}

// The drift report from histograms kept by minute is the report of every
// record of both windows read whole, for windows whose edges are minutes
// and windows whose edges cut minutes: at the first read, after answers written since (by this log and by
// another replica's on the same store), and once the windows moved on,
// when the minutes before the reference window have left.
func TestDriftReportEqualsTheFullRead(t *testing.T) {
	for _, st := range driftStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			opt := st.opt(t)
			opt.Linger = -1
			open := func() *decisionlog.Log {
				l, err := decisionlog.Open(ctx, opt)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close(ctx) })
				return l
			}
			l := open()
			r := rand.New(rand.NewPCG(5, 6))
			// until is a minute's start in the past, so that answers come
			// after it in its minute; odd is inside a minute, as are its
			// windows' edges.
			until := slotStart(slotOf(time.Now().UnixNano()) - 3)
			odd := until.Add(-17*time.Second - 300*time.Millisecond)
			do := DriftOptions{Window: time.Hour, Reference: 24 * time.Hour}
			var edges []time.Time
			for _, u := range []time.Time{until, odd} {
				cut, start := u.Add(-do.Window), u.Add(-do.Window-do.Reference)
				edges = append(edges, cut, cut.Add(-time.Nanosecond), start, start.Add(-time.Nanosecond), u, u.Add(-time.Nanosecond), u.Add(time.Nanosecond))
			}
			logAnswers(t, l, r, 3000, func(i int) time.Time {
				if i < len(edges)*10 {
					return edges[i%len(edges)]
				}
				// Over the last 26 hours, a third in the current window.
				if i%3 == 0 {
					return until.Add(-time.Duration(r.Int64N(int64(do.Window))))
				}
				return until.Add(-time.Duration(r.Int64N(int64(26 * time.Hour))))
			})
			tr := NewTracker(l)
			check := func(what string, until time.Time) []SignatureDrift {
				t.Helper()
				return checkDrift(t, tr, l, what, until, do)
			}
			first := check("the first read", until)
			check("the first read, at a time inside a minute", odd)
			if len(first) != 6 {
				t.Fatalf("the first read: %d signatures, want 6 (two models, three signatures)", len(first))
			}

			// Answers written since, by this log and another replica's,
			// some in the current window, some before it.
			other := open()
			logAnswers(t, l, r, 300, func(int) time.Time { return until.Add(-time.Duration(r.Int64N(int64(25 * time.Hour)))) })
			logAnswers(t, other, r, 300, func(int) time.Time { return until.Add(-time.Duration(r.Int64N(int64(time.Hour)))) })
			later := check("answers written since", until)
			check("answers written since, at a time inside a minute", odd)
			var before, after int
			for i := range first {
				before += first[i].Current + first[i].Reference
				after += later[i].Current + later[i].Reference
			}
			if after <= before {
				t.Fatalf("answers written since: %d answers counted, %d before them", after, before)
			}

			// Two hours on, the minutes before the new reference window
			// (and its leeway) leave.
			moved := until.Add(2 * time.Hour)
			check("the windows moved on", moved)
			from := slotOf(moved.Add(-do.Window-do.Reference).UnixNano()) - driftLeeway
			tr.drift.mu.Lock()
			for si := range tr.drift.slots {
				if si < from {
					t.Errorf("the minute from %s is kept, before the reference window from %s", slotStart(si), slotStart(from))
				}
			}
			if len(tr.drift.slots) == 0 {
				t.Error("no minute kept")
			}
			tr.drift.mu.Unlock()
		})
	}
}

// On PostgreSQL a record may commit after one of a larger id, written by
// another replica: the report that read past its id counts it once it
// commits.
func TestDriftCountsARecordCommittedLate(t *testing.T) {
	ctx := context.Background()
	u := testengine.PostgresSchema(t, "d_")
	l, err := decisionlog.Open(ctx, decisionlog.Options{URL: u, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	r := rand.New(rand.NewPCG(7, 8))
	now := time.Now()
	logAnswers(t, l, r, 50, func(int) time.Time { return now.Add(-time.Minute) })
	tr := NewTracker(l)
	do := DriftOptions{Window: time.Hour, Reference: time.Hour}
	count := func() int {
		rep, err := tr.Report(ctx, nil, ReportOptions{Since: now.Add(-time.Hour), Until: time.Now(), Drift: do})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range rep.Drift {
			n += d.Current + d.Reference
		}
		return n
	}
	before := count()

	// Another replica's insert takes its id and holds its transaction
	// open while this log writes more.
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO decisions (request_id, question_id, at_ns, face, model, node, kind, options, engine_dist, steps, final_dist, latency_us, state_sha256)
		VALUES ('late', 'q', $1, 'systemone', 'a', 'n', 'noul', '["true","false"]', '[0.7,0.3]', '[]', '[0.7,0.3]', 0, '')`, now.Add(-time.Minute).UnixNano()); err != nil {
		t.Fatal(err)
	}
	logAnswers(t, l, r, 20, func(int) time.Time { return now.Add(-time.Minute) })
	mid := count()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	after := count()
	want, err := reportDriftFull(ctx, l, time.Now(), do)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range want {
		n += d.Current + d.Reference
	}
	if after != mid+1 || after != n || mid <= before {
		t.Fatalf("answers counted: %d, then %d with 20 more written, then %d once the late one committed; the full read counts %d", before, mid, after, n)
	}
}

// Records the log prunes (max_rows) leave the drift report, those of a
// minute the prune cuts as well as whole minutes.
func TestDriftForgetsPrunedRecords(t *testing.T) {
	ctx := context.Background()
	l, err := decisionlog.Open(ctx, decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db"), Linger: -1, MaxRows: 300})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	r := rand.New(rand.NewPCG(9, 10))
	until := slotStart(slotOf(time.Now().UnixNano()) - 1)
	// In order of time, several a minute: the prune cuts a minute.
	logAnswers(t, l, r, 600, func(i int) time.Time { return until.Add(-2*time.Hour + time.Duration(i)*7100*time.Millisecond) })
	do := DriftOptions{Window: time.Hour, Reference: 24 * time.Hour}
	tr := NewTracker(l)
	report := func(what string) int {
		t.Helper()
		n := 0
		for _, d := range checkDrift(t, tr, l, what, until, do) {
			n += d.Reference + d.Current
		}
		return n
	}
	before := report("before the prune")
	if n, err := l.Prune(ctx); err != nil || n != 300 {
		t.Fatalf("pruned %d: %v", n, err)
	}
	tr.drift.pruned = time.Time{} // as if a minute had passed
	if after := report("after the prune"); after >= before || after == 0 {
		t.Fatalf("%d answers counted after the prune, %d before", after, before)
	}
}

// A first read of more records than twice driftSlack, in no id order,
// keeps only the ids it needs on its way and still reports what a read of
// every record does, then counts the records written after it once.
func TestDriftFirstReadOfManyRecords(t *testing.T) {
	ctx := context.Background()
	opt := driftStores[0].opt(t)
	opt.Linger = -1
	l, err := decisionlog.Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	r := rand.New(rand.NewPCG(7, 8))
	until := slotStart(slotOf(time.Now().UnixNano()) - 3)
	do := DriftOptions{Window: time.Hour, Reference: 24 * time.Hour}
	logAnswers(t, l, r, 2*driftSlack+5000, func(int) time.Time {
		return until.Add(-time.Duration(r.Int64N(int64(25 * time.Hour))))
	})
	tr := NewTracker(l)
	for _, what := range []string{"the first read", "answers written since"} {
		if what != "the first read" {
			logAnswers(t, l, r, 500, func(int) time.Time { return until.Add(-time.Duration(r.Int64N(int64(time.Hour)))) })
		}
		checkDrift(t, tr, l, what, until, do)
		tr.drift.mu.Lock()
		if n := len(tr.drift.seen); n > driftSlack {
			t.Errorf("%s: %d ids kept above the low one, want at most driftSlack (%d)", what, n, driftSlack)
		}
		tr.drift.mu.Unlock()
	}
}

// On SQLite the answers this process records are counted as its writer
// commits them, without the log being read: the id read up to moves past
// them before any report. The reports after them, whose windows' edges
// cut the recent minutes (added up by second), are the full read's.
func TestDriftFedAsAnswersAreRecorded(t *testing.T) {
	ctx := context.Background()
	opt := driftStores[0].opt(t)
	opt.Linger = -1
	l, err := decisionlog.Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	r := rand.New(rand.NewPCG(9, 10))
	now := time.Now()
	recent := func(int) time.Time { return now.Add(-time.Duration(r.Int64N(int64(100 * time.Second)))) }
	logAnswers(t, l, r, 400, recent)
	tr := NewTracker(l)
	do := DriftOptions{Window: 40 * time.Second, Reference: 50 * time.Second}
	report := func(what string, until time.Time) {
		t.Helper()
		checkDrift(t, tr, l, what, until, do)
	}
	report("the first read", now)
	counted := func() (low int64, n int) {
		tr.drift.mu.Lock()
		defer tr.drift.mu.Unlock()
		for _, s := range tr.drift.slots {
			for _, c := range s.cells {
				n += c.hist.N
			}
		}
		return tr.drift.low, n
	}
	low, n := counted()

	const more = 300
	logAnswers(t, l, r, more, recent)
	if low2, n2 := counted(); low2 != low+more || n2 <= n {
		t.Fatalf("after %d answers recorded, before a report: read up to id %d from %d, %d answers counted from %d; want the ids moved past them and more answers", more, low2, low, n2, n)
	}
	report("answers fed", now)
	report("answers fed, edges inside seconds", now.Add(-7*time.Second-300*time.Millisecond))
	report("answers fed, edges on seconds", now.Truncate(time.Second))
	report("answers fed, until now", time.Now())
}

// A caller choosing fresh options with each request makes a signature a
// request: a minute keeps the histograms of at most driftSignaturesMost
// of them, read at the first report or counted as the writer commits
// them, and the report is still the full read's, minutes kept by second
// and an edge's second read again alike.
func TestDriftKeepsBoundedSignatures(t *testing.T) {
	ctx := context.Background()
	l, err := decisionlog.Open(ctx, decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db"), Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(ctx) })
	now := time.Now()
	older := slotStart(slotOf(now.UnixNano()) - 10)
	n := 0
	fresh := func(count int, at func(i int) time.Time) {
		t.Helper()
		for i := range count {
			n++
			l.Record(decisionlog.Record{RequestID: fmt.Sprintf("r-%d", n), QuestionID: "q", Time: at(i),
				Face: decisionlog.FaceSystemOne, Model: "m", Node: "n", Kind: decision.Choice,
				Options: []string{fmt.Sprintf("fresh %d", n), "b"}, EngineDist: []float64{0.7, 0.3}})
		}
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A minute of the current window, and the last seconds (kept by
	// second; the last read again).
	fresh(1200, func(i int) time.Time { return older.Add(time.Duration(i) * 40 * time.Millisecond) })
	fresh(1200, func(i int) time.Time { return now.Add(-time.Duration(i) * 15 * time.Millisecond) })
	tr := NewTracker(l)
	do := DriftOptions{Window: time.Hour, Reference: 24 * time.Hour}
	bounded := func(what string) {
		t.Helper()
		tr.drift.mu.Lock()
		defer tr.drift.mu.Unlock()
		for si, s := range tr.drift.slots {
			if len(s.cells) > driftSignaturesMost {
				t.Fatalf("%s: the minute from %s keeps %d signatures, more than %d", what, slotStart(si), len(s.cells), driftSignaturesMost)
			}
			for _, cs := range s.fine {
				for k := range cs {
					if _, ok := s.cells[k]; !ok {
						t.Fatalf("%s: a second of the minute from %s keeps %v, which the minute does not", what, slotStart(si), k)
					}
				}
			}
		}
	}
	check := func(what string, until time.Time) int {
		t.Helper()
		rep, err := tr.Report(ctx, nil, ReportOptions{Since: until.Add(-time.Hour), Until: until, Drift: do})
		if err != nil {
			t.Fatal(err)
		}
		bounded(what)
		want, err := reportDriftFull(ctx, l, until, do)
		if err != nil {
			t.Fatal(err)
		}
		sameDrift(t, what, rep.Drift, want)
		return len(rep.Drift)
	}
	until := time.Now()
	if got := check("the first read", until); got < driftSignaturesMost {
		t.Fatalf("the first read: %d signatures", got)
	}
	// More, counted as the writer commits them.
	fresh(1200, func(i int) time.Time { return older.Add(time.Duration(i)*40*time.Millisecond + time.Millisecond) })
	fresh(1200, func(i int) time.Time { return until.Add(-time.Duration(i)*15*time.Millisecond - time.Millisecond) })
	check("answers written since", until)
}
