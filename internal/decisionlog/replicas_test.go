package decisionlog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Two logs on one PostgreSQL database act as two system1 replicas: they
// create the schema at the same moment and write at once; every record of
// both is there, and an outcome given through one is seen by the other.
func TestPostgresTwoReplicasShareOneLog(t *testing.T) {
	url := postgresURL(t)
	ctx := ctxT(t)
	const each = 2000
	logs := make([]*Log, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs[i], errs[i] = Open(ctx, Options{URL: url, Queue: each})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	for i, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				l.Record(sample(fmt.Sprintf("r%d_%d", i, j), "q", t0))
			}
		}()
	}
	wg.Wait()
	for i, l := range logs {
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if s := l.Stats(); s.Written != each || s.Dropped != 0 || s.Failed != 0 {
			t.Fatalf("replica %d: %+v", i, s)
		}
	}
	a, b := openLog(t, Options{URL: url}), openLog(t, Options{URL: url})
	if n := count(t, a, "decisions"); n != 2*each {
		t.Fatalf("%d records, want %d from both replicas", n, 2*each)
	}
	for i := range 2 {
		for _, j := range []int{0, each / 2, each - 1} {
			if es, err := a.Lookup(ctx, fmt.Sprintf("r%d_%d", i, j)); err != nil || len(es) != 1 {
				t.Fatalf("r%d_%d: %v, %v", i, j, es, err)
			}
		}
	}
	if _, err := a.Outcome(ctx, "r1_7", "q", "sales"); err != nil {
		t.Fatal(err)
	}
	es, err := b.Lookup(context.Background(), "r1_7")
	if err != nil || es[0].Outcome == nil || es[0].Outcome.Value != "sales" {
		t.Fatalf("the other replica sees %+v, %v", es, err)
	}
}

// A replica that restarts while a long transaction holds the shared
// log's tables (a backup: pg_dump holds an ACCESS SHARE lock on every
// table for the whole dump; a long write: another replica's prune
// deleting many rows holds ROW EXCLUSIVE) opens it, and the replicas
// already running go on writing and reading: opening a log whose schema
// is current asks for no table lock, so nothing waits for that
// transaction to end, nor queues behind a restart that waits for it.
func TestPostgresReplicaRestartsBesideALongTransaction(t *testing.T) {
	for _, c := range []struct{ name, mode string }{
		{"a backup", "ACCESS SHARE"},
		{"a long write", "ROW EXCLUSIVE"},
	} {
		t.Run(c.name, func(t *testing.T) { restartBeside(t, c.mode) })
	}
}

func restartBeside(t *testing.T, mode string) {
	url := postgresURL(t)
	ctx := ctxT(t)
	running := openLog(t, Options{URL: url, Linger: -1})
	running.Record(sample("before", "q", t0))
	if err := running.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	dump, err := running.store.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dump.Rollback()
	if _, err := dump.ExecContext(ctx, "LOCK TABLE decisions, outcomes, questions, uncertain IN "+mode+" MODE"); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := Open(octx, Options{URL: url})
		if err == nil {
			err = l.Close(ctx)
		}
		opened <- err
	}()
	// The restart is under way (its open waits, or is done) before the
	// running replica writes.
	var done bool
	for deadline := time.Now().Add(2 * time.Second); !done && time.Now().Before(deadline); {
		var waiting int
		if err := running.store.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_locks WHERE NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-opened:
			opened <- err
			done = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	running.Record(sample("during", "q", t0))
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := running.Flush(wctx); err != nil {
		t.Errorf("the running replica's writer waits on the restart: %v", err)
	}
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("the restarted replica did not open the log: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted replica's open hangs")
	}
	if _, err := running.Outcome(wctx, "during", "q", "sales"); err != nil {
		t.Fatalf("feedback on the running replica waits on the restart: %v", err)
	}
	// A log made before a column still gains it.
	if err := dump.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := running.store.db.ExecContext(ctx, "ALTER TABLE decisions DROP COLUMN output_tokens"); err != nil {
		t.Fatal(err)
	}
	openLog(t, Options{URL: url})
	var n int
	if err := running.store.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM decisions WHERE output_tokens = 0").Scan(&n); err != nil || n != 2 {
		t.Fatalf("output_tokens after the open: %d rows, %v", n, err)
	}
}
