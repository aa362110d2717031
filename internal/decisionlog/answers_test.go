package decisionlog

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// EachAnswer and AnswersAfter read of each record what its Entry gives
// drift (Uncalibrated: before any calibrator, the options, face, model, kind, time), on both stores:
// EachAnswer the records of its span of decision time, AnswersAfter
// those after an id in id order, in batches.
func TestAnswersAreTheEntries(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			r := rand.New(rand.NewPCG(3, 4))
			now := time.Now().Add(-time.Hour)
			for i := range 200 {
				l.Record(variedRecord(r, i, now.Add(-time.Duration(r.IntN(3000))*time.Second)))
			}
			es, err := l.Window(ctx, now.Add(-time.Hour), now.Add(time.Second), "")
			if err != nil {
				t.Fatal(err)
			}
			answerOf := func(e Entry) Answer {
				return Answer{ID: e.ID, At: e.Time.UnixNano(), Face: e.Face, Model: e.Model, Kind: e.Kind, Options: e.Options, Dist: e.Uncalibrated()}
			}
			// A span of 25 minutes, edges included as Window's.
			since, until := now.Add(-40*time.Minute), now.Add(-15*time.Minute)
			var want []Answer
			for _, e := range es {
				if !e.Time.Before(since) && e.Time.Before(until) {
					want = append(want, answerOf(e))
				}
			}
			var got []Answer
			if err := l.EachAnswer(ctx, since, until, func(a Answer) { got = append(got, a) }); err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(got, func(a, b Answer) int { return int(a.ID - b.ID) })
			if len(want) < 50 || !reflect.DeepEqual(got, want) {
				t.Fatalf("EachAnswer: %d answers, want %d:\n%+v\n%+v", len(got), len(want), got, want)
			}

			want = want[:0]
			for _, e := range es {
				want = append(want, answerOf(e))
			}
			got = got[:0]
			for after := int64(0); ; {
				last, n, err := l.AnswersAfter(ctx, after, 7, func(a Answer) { got = append(got, a) })
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					if last != after {
						t.Fatalf("AnswersAfter(%d): nothing, but %d to read on from", after, last)
					}
					break
				}
				after = last
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("AnswersAfter: %d answers, want %d", len(got), len(want))
			}
		})
	}
}
