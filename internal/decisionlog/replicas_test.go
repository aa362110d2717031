package decisionlog

import (
	"context"
	"fmt"
	"sync"
	"testing"
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
