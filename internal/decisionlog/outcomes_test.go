package decisionlog

import (
	"fmt"
	"testing"
	"time"
)

// A batch of outcomes is recorded in order in one transaction: each
// outcome counts those of the batch before it for its question, the last
// one wins, and a tail reads them in the order given. On PostgreSQL every
// row of the batch is written by one transaction (its xmin).
func TestOutcomesBatchInOrderOneTransaction(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			for i := range 3 {
				l.Record(sample(fmt.Sprintf("req_%d", i), "department", t0))
			}
			if _, err := l.Outcome(ctx, "req_0", "department", "billing"); err != nil {
				t.Fatal(err)
			}
			var batch []Checked
			for _, o := range []struct{ req, value string }{
				{"req_0", "sales"}, {"req_1", "technical"}, {"req_0", "technical"}, {"req_2", NoneFit}, {"req_1", "billing"},
			} {
				e, err := l.Check(ctx, o.req, "department", o.value)
				if err != nil {
					t.Fatal(err)
				}
				batch = append(batch, Checked{Entry: e, Outcome: o.value})
			}
			es, err := l.Outcomes(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []int{2, 1, 3, 1, 2} {
				if es[i].Outcomes != want || es[i].Outcome.Value != batch[i].Outcome || es[i].RequestID != batch[i].Entry.RequestID {
					t.Errorf("entry %d: %s %+v of %d, want %s of %d", i, es[i].RequestID, es[i].Outcome, es[i].Outcomes, batch[i].Outcome, want)
				}
			}
			for req, want := range map[string]string{"req_0": "technical", "req_1": "billing", "req_2": NoneFit} {
				got, err := l.Lookup(ctx, req)
				if err != nil || got[0].Outcome == nil || got[0].Outcome.Value != want {
					t.Errorf("%s: latest %+v, want %s (%v)", req, got, want, err)
				}
			}
			tail, _, err := l.OutcomesAfter(ctx, 0, 100)
			if err != nil || len(tail) != 6 {
				t.Fatalf("tail: %d outcomes, %v", len(tail), err)
			}
			for i, c := range batch {
				if lb := tail[i+1]; lb.RequestID != c.Entry.RequestID || lb.Outcome.Value != c.Outcome {
					t.Errorf("tail %d: %s %s, want %s %s", i+1, lb.RequestID, lb.Outcome.Value, c.Entry.RequestID, c.Outcome)
				}
			}
			if b.name == "postgres" {
				var txs int
				if err := l.store.db.QueryRowContext(ctx, "SELECT COUNT(DISTINCT xmin::text) FROM outcomes").Scan(&txs); err != nil {
					t.Fatal(err)
				}
				if txs != 2 {
					t.Errorf("the outcomes were written by %d transactions, want 2: the first outcome's and the batch's", txs)
				}
			}
		})
	}
}

// On PostgreSQL an outcome's id is drawn before its transaction commits.
// While another replica's outcome is written but not committed, a later
// batch waits for it, so a reader tailing by id (OutcomesAfter, the
// tracker) never passes over the earlier id to read the later one.
func TestOutcomesCommitInIDOrderAcrossReplicas(t *testing.T) {
	ctx := ctxT(t)
	u := postgresURL(t)
	l := openLog(t, Options{URL: u, Linger: -1})
	l.Record(sample("req_0", "department", t0))
	l.Record(sample("req_1", "department", t0))
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	other := openLog(t, Options{URL: u, Linger: -1})
	// The other replica's writer, mid-transaction.
	tx, err := other.store.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", outcomeLock)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO outcomes (request_id, question_id, outcome, at_ns) VALUES ('req_0', 'department', 'sales', $1)", t0.UnixNano()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Outcome(ctx, "req_1", "department", "billing")
		done <- err
	}()
	// Until the batch waits for the lock, or is written without it.
	var finished bool
	for !finished {
		var waiting int
		err := other.store.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1 AND objid = $2",
			int64(outcomeLock>>32), int64(outcomeLock&0xffffffff)).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	read, after, err := l.OutcomesAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !finished {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	more, _, err := l.OutcomesAfter(ctx, after, 100)
	if err != nil {
		t.Fatal(err)
	}
	read = append(read, more...)
	var got []string
	for _, lb := range read {
		got = append(got, lb.RequestID+" "+lb.Outcome.Value)
	}
	if want := []string{"req_0 sales", "req_1 billing"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the tail read %q, want %q", got, want)
	}
}
