package decisionlog

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"system1/internal/decision"
)

// The questions asked are kept only with KeepStates, read back by
// request and question id as they were asked, and pruned with the
// decisions: by age and by the row bound.
func TestQuestionsKeptWithStatesAndPruned(t *testing.T) {
	for _, b := range backends(t) {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep_states=%v", b.name, keep), func(t *testing.T) { testQuestions(t, b, keep) })
		}
	}
}

func testQuestions(t *testing.T, b backend, keep bool) {
	ctx := ctxT(t)
	now := t0.Add(40 * 24 * time.Hour)
	q := decision.Question{ID: "q", Kind: decision.Choice, Instructions: json.RawMessage(`"Which team?"`),
		Options: []decision.Option{{Key: "sales", Name: "sales", Text: json.RawMessage(`"the sales team"`)}, {Key: "support", Name: "support"}}}
	l := b.open(t, Options{KeepStates: keep, Retention: 30 * 24 * time.Hour, MaxRows: 5, Now: func() time.Time { return now }})
	for i := range 10 {
		// req_0..req_2 are older than 30 days; req_3 and req_4 go by the row bound.
		r := sample(fmt.Sprintf("req_%d", i), "q", t0.Add(time.Duration(i)*4*24*time.Hour))
		r.Question = &q
		l.Record(r)
	}
	_, qs, _, err := l.Replayable(ctx, time.Time{}, now, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !keep {
		if len(qs) != 0 {
			t.Fatalf("without keep_states, %d questions kept", len(qs))
		}
		return
	}
	var got decision.Question
	if len(qs) != 10 || json.Unmarshal(qs[QuestionKey{"req_7", "q"}], &got) != nil || string(got.Instructions) != `"Which team?"` ||
		len(got.Options) != 2 || string(got.Options[0].Text) != `"the sales team"` {
		t.Fatalf("%d questions; req_7's: %+v", len(qs), got)
	}
	if _, err := l.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if _, qs, _, err = l.Replayable(ctx, time.Time{}, now, "", 0, 100); err != nil || len(qs) != 5 {
		t.Fatalf("after pruning: %d questions, %v; want 5", len(qs), err)
	}
	for i := 5; i < 10; i++ {
		if _, ok := qs[QuestionKey{fmt.Sprint("req_", i), "q"}]; !ok {
			t.Fatalf("req_%d's question was pruned: %v", i, qs)
		}
	}
}

// A replay reads the log a page of requests at a time, the latest first:
// each page holds whole requests (their records in the window and their
// questions), never a shadow's, the candidate's own or a state-less
// request, and the pages together hold every other request once.
func TestReplayableReadsPagesOfTheLatestRequests(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{KeepStates: true})
			q := decision.Question{ID: "q", Kind: decision.Choice, Options: []decision.Option{{Key: "a", Name: "a"}, {Key: "b", Name: "b"}}}
			at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
			var want []string // latest first
			for i := range 7 {
				id := fmt.Sprint("req_", i)
				for _, qid := range []string{"q", "r"} {
					r := sample(id, qid, at(i))
					r.Question = &q
					l.Record(r)
				}
				want = append([]string{id}, want...)
			}
			skip := func(id string, edit func(*Record)) {
				r := sample(id, "q", at(3))
				r.Question = &q
				edit(&r)
				l.Record(r)
			}
			skip("shadow", func(r *Record) { r.Face = FaceShadow })
			skip("candidate", func(r *Record) { r.Model = "cand" })
			skip("stateless", func(r *Record) { r.State = nil })
			skip("late", func(r *Record) { r.Time = at(100) })

			var got []string
			before := int64(0)
			for pages := 1; ; pages++ {
				es, qs, next, err := l.Replayable(ctx, t0, at(50), "cand", before, 3)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, e := range es {
					if _, ok := qs[QuestionKey{e.RequestID, e.QuestionID}]; !ok {
						t.Fatalf("page %d: no question for %s/%s", pages, e.RequestID, e.QuestionID)
					}
					if len(ids) == 0 || ids[len(ids)-1] != e.RequestID {
						ids = append(ids, e.RequestID)
					}
				}
				if len(es) != 2*len(ids) || len(ids) > 3 {
					t.Fatalf("page %d: %d records of requests %v", pages, len(es), ids)
				}
				slices.Reverse(ids)
				got = append(got, ids...)
				if next == 0 {
					break
				}
				if pages > 3 {
					t.Fatalf("no end after %d pages: %v", pages, got)
				}
				before = next
			}
			if !slices.Equal(got, want) {
				t.Errorf("requests %v; want %v", got, want)
			}
		})
	}
}
