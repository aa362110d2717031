package decisionlog

import (
	"encoding/json"
	"fmt"
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
	qs, err := l.Questions(ctx, time.Time{}, now)
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
	if qs, err = l.Questions(ctx, time.Time{}, now); err != nil || len(qs) != 5 {
		t.Fatalf("after pruning: %d questions, %v; want 5", len(qs), err)
	}
	for i := 5; i < 10; i++ {
		if _, ok := qs[QuestionKey{fmt.Sprint("req_", i), "q"}]; !ok {
			t.Fatalf("req_%d's question was pruned: %v", i, qs)
		}
	}
}
