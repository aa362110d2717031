package decisionlog

import (
	"fmt"
	"testing"
)

// OutcomesAfter reads each outcome once, in the order recorded, with the
// record it is for, in batches a reader resumes from; what comes after
// its last read, and only that, is read next. Oldest is the least record
// kept.
func TestOutcomesAfterReadsWhatChanged(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			for i := range 7 {
				l.Record(sample(fmt.Sprintf("req_%d", i), "department", t0))
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			want := []string{"billing", "sales", "technical", "billing", "sales"}
			for i, o := range want {
				if _, err := l.Outcome(ctx, fmt.Sprintf("req_%d", i), "department", o); err != nil {
					t.Fatal(err)
				}
			}
			var got []Labelled
			after := int64(0)
			for range 10 {
				batch, next, err := l.OutcomesAfter(ctx, after, 2)
				if err != nil {
					t.Fatal(err)
				}
				if next == after {
					break
				}
				if len(batch) == 0 || len(batch) > 2 {
					t.Fatalf("a batch of %d", len(batch))
				}
				got, after = append(got, batch...), next
			}
			if len(got) != len(want) {
				t.Fatalf("read %d outcomes, want %d", len(got), len(want))
			}
			for i, lb := range got {
				if lb.RequestID != fmt.Sprintf("req_%d", i) || lb.Outcome.Value != want[i] || len(lb.EngineDist) != 3 || lb.Kind != "choice" ||
					(i > 0 && lb.OutcomeID <= got[i-1].OutcomeID) {
					t.Errorf("outcome %d: %+v", i, lb)
				}
			}
			// A correction is read as one more outcome, after the others.
			if _, err := l.Outcome(ctx, "req_0", "department", "sales"); err != nil {
				t.Fatal(err)
			}
			batch, next, err := l.OutcomesAfter(ctx, after, 100)
			if err != nil || len(batch) != 1 || batch[0].RequestID != "req_0" || batch[0].Outcome.Value != "sales" || next <= after {
				t.Fatalf("after a correction: %+v %d %v", batch, next, err)
			}
			if batch, again, err := l.OutcomesAfter(ctx, next, 100); err != nil || len(batch) != 0 || again != next {
				t.Fatalf("nothing new: %+v %d %v", batch, again, err)
			}
			oldest, err := l.Oldest(ctx)
			if err != nil || oldest != got[0].ID {
				t.Errorf("oldest %d, want %d (%v)", oldest, got[0].ID, err)
			}
		})
	}
}

// EachCase gives every record with an outcome once, in record order,
// with its latest outcome, and the last outcome id it read up to, from
// which OutcomesAfter reads on.
func TestEachCaseReadsTheLogOnce(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			for i := range 12 { // past two batches of 5
				l.Record(sample(fmt.Sprintf("req_%d", i), "department", t0))
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				i int
				o string
			}{{11, "sales"}, {3, "billing"}, {3, "technical"}, {7, "sales"}} {
				if _, err := l.Outcome(ctx, fmt.Sprintf("req_%d", c.i), "department", c.o); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			opts := sample("", "", t0).Options
			upTo, err := l.eachCase(ctx, 5, func(c Case) { got = append(got, c.RequestID+"="+opts[c.Expected]) })
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"req_3=technical", "req_7=sales", "req_11=sales"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("read %v, want %v", got, want)
			}
			if batch, next, err := l.OutcomesAfter(ctx, upTo, 10); err != nil || len(batch) != 0 || next != upTo {
				t.Errorf("after EachCase: %d more, %v", len(batch), err)
			}
		})
	}
}
