package outcomes

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// A shadow report reads the shadow answers of its window and the served
// answers they pair with, not every record of the window: the dashboard
// asks for it every few seconds, and a week of a busy server's answers
// decoded whole on each ask took memory and CPU in proportion to the
// log. Its pairs are those of reading every record: the served answer
// recorded before the shadow's (the latest, where an id was reused),
// with its outcome.
func TestShadowReportReadsOnlyTheShadowedRequests(t *testing.T) {
	ctx := context.Background()
	l := openLog(t)
	now := time.Now()
	rec := func(req, face, model string, at time.Time, dist []float64) {
		l.Record(decisionlog.Record{RequestID: req, QuestionID: "q", Time: at, Face: face, Model: model, Node: "n",
			Kind: decision.Choice, Options: []string{"a", "b"}, EngineDist: dist})
	}
	const unshadowed = 20000
	for i := range unshadowed {
		rec(fmt.Sprintf("other-%d", i), decisionlog.FaceSystemOne, "m", now.Add(-time.Hour), []float64{0.5, 0.5})
		if i%1000 == 999 { // within the queue's bound
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec("r1", decisionlog.FaceSystemOne, "m", now.Add(-2*time.Hour), []float64{0.1, 0.9}) // reused below
	rec("r1", decisionlog.FaceSystemOne, "m", now.Add(-time.Hour), []float64{0.8, 0.2})
	rec(decisionlog.ShadowRequestID("r1"), decisionlog.FaceShadow, "cand", now.Add(-time.Hour), []float64{0.7, 0.3})
	rec("r2", decisionlog.FaceSystemOne, "m", now.Add(-time.Hour), []float64{0.6, 0.4})
	rec(decisionlog.ShadowRequestID("r2"), decisionlog.FaceShadow, "cand", now.Add(-time.Hour), []float64{0.4, 0.6})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Outcome(ctx, "r1", "q", "a"); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := ReportShadow(ctx, l, now.Add(-24*time.Hour), now)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	// Each record of the window read whole costs over 1 KiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("the report allocated %d MiB over a log of %d answers of which 2 were shadowed", alloc>>20, unshadowed+5)
	}
	if len(rep.Signatures) != 1 {
		t.Fatalf("%d signatures; want 1: %+v", len(rep.Signatures), rep.Signatures)
	}
	s := rep.Signatures[0]
	if s.Model != "m" || s.Candidate != "cand" || s.N != 2 || s.Labelled != 1 || s.Agreement != 0.5 {
		t.Errorf("%+v; want m against cand, 2 pairs (r1's latest served answer and r2's), 1 labelled, agreeing on 1", s)
	}
}

// A cascade records each stage's answer to a question under the request
// (docs/cascades.md), and a shadow of a stage's request carries its
// stage: the shadow answer pairs with the answer of the stage it
// shadowed, not with a later stage's recorded before it, so the report
// compares the candidate with the model the shadow rule names.
func TestShadowReportPairsACascadeStageWithItsOwnAnswer(t *testing.T) {
	ctx := context.Background()
	l := openLog(t)
	now := time.Now()
	rec := func(req, face, model string, stage int, dist []float64) {
		l.Record(decisionlog.Record{RequestID: req, QuestionID: "q", Time: now.Add(-time.Hour), Face: face, Model: model, Node: "n",
			Kind: decision.Choice, Options: []string{"a", "b"}, EngineDist: dist, Cascade: "casc", Stage: stage})
	}
	// Stage 0 (small) escalated the question to stage 1 (large); the
	// shadow of stage 0's request (small to cand) is written after both,
	// as its worker asks the candidate off the request path.
	rec("r1", decisionlog.FaceSystemOne, "small", 0, []float64{0.6, 0.4})
	rec("r1", decisionlog.FaceSystemOne, "large", 1, []float64{0.1, 0.9})
	rec(decisionlog.ShadowRequestID("r1"), decisionlog.FaceShadow, "cand", 0, []float64{0.6, 0.4})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := ReportShadow(ctx, l, now.Add(-24*time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Signatures) != 1 {
		t.Fatalf("%d signatures; want 1: %+v", len(rep.Signatures), rep.Signatures)
	}
	if s := rep.Signatures[0]; s.Model != "small" || s.Candidate != "cand" || s.N != 1 || s.Agreement != 1 {
		t.Errorf("%s against %s, %d pairs agreeing on %.2f; want small (the stage shadowed) against cand, 1 pair agreeing on 1", s.Model, s.Candidate, s.N, s.Agreement)
	}
}
