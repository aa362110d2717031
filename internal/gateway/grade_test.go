package gateway

import (
	"fmt"
	"testing"

	"system1/internal/fakeengine"
)

// Decide grades every answer against the gate (the threshold, until a
// calibration report suggests one): act when the confidence clears it and
// the runner-up is not close, ask near the gate or with a close second,
// escalate under it.
func TestDecideGrade(t *testing.T) {
	for _, tc := range []struct {
		threshold float64
		probs     []float64
		grade     string
	}{
		{0.6, []float64{0.8, 0.15, 0.05}, GradeAct},
		{0.6, []float64{0.55, 0.25, 0.2}, GradeAsk},      // under the gate by less than AskBand
		{0.6, []float64{0.45, 0.35, 0.2}, GradeEscalate}, // under it by more
		{0.3, []float64{0.45, 0.4, 0.15}, GradeAsk},      // over it, with a close second
		{0.3, []float64{0.6, 0.3, 0.1}, GradeAct},
	} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(tc.probs...)}})
		t.Cleanup(f.Close)
		g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: %v\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", tc.threshold, f.URL), nil)
		res := decide(t, g, `{"question":"Which?","options":["a","b","c"]}`)
		if res.Grade != tc.grade {
			t.Errorf("threshold %v, %v: grade %q, want %q (%s)", tc.threshold, tc.probs, res.Grade, tc.grade, res.Rationale)
		}
	}
	// An abstention because no option fit is escalated whatever its confidence.
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.05, 0.01, 0.9)}})
	t.Cleanup(f.Close)
	g := gatewayFor(t, fmt.Sprintf("nodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL), nil)
	if res := decide(t, g, `{"question":"Which?","options":["a","b"],"none_option":true}`); res.Status != Abstained || res.Grade != GradeEscalate {
		t.Errorf("none won: status %s, grade %q", res.Status, res.Grade)
	}
	if res := decide(t, g, `{"question":"Which?","options":["a","b"],"min_label_mass":0.5}`); res.Status != Abstained || res.Grade != GradeEscalate {
		t.Errorf("label mass under the minimum: status %s, grade %q", res.Status, res.Grade)
	}
	if res := decide(t, g, `{"question":""}`); res.Grade != "" {
		t.Errorf("an error is graded %q", res.Grade)
	}
}
