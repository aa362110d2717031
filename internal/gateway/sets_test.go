package gateway

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fakeengine"
)

// Decide with coverage gives the answer's prediction set, the level it is
// built for and the outcomes it rests on; act needs a set of one that
// holds the decision, so a clear answer whose set holds two is ask; too
// few outcomes for the coverage is no set, said so in set_note; a
// coverage outside [0.5, 0.99] is refused, naming the field.
func TestDecideCoverage(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.8, 0.15, 0.05)}})
	t.Cleanup(f.Close)
	fit := calibration.Fit{Model: "tiny", Kind: decision.Choice, Bucket: "3-4", Temperature: 1, N: 300, Sets: []calibration.Conformal{
		{Method: calibration.ConformalLAC, Coverage: 0.8, N: 300, Threshold: 0.5}, // p >= 0.5: the decision alone
		{Method: calibration.ConformalLAC, Coverage: 0.9, N: 300, Threshold: 0.9}, // p >= 0.1: two options
	}}
	path := writeFits(t, fit)
	g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\n  fits: %s\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", path, f.URL))
	if errs := g.ConfigErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		coverage string
		set      []string
		level    float64
		grade    string
		note     string
	}{
		{"", nil, 0, GradeAct, ""},
		{`,"coverage":0.8`, []string{"a"}, 0.8, GradeAct, ""},
		{`,"coverage":0.75`, []string{"a"}, 0.8, GradeAct, ""},
		{`,"coverage":0.9`, []string{"a", "b"}, 0.9, GradeAsk, ""},
		{`,"coverage":0.95`, nil, 0, GradeAsk, "the fit's sets reach coverage 0.9 at most, on 300 outcomes; none is built for coverage 0.95"},
	} {
		res := decide(t, g, `{"question":"Which?","options":["a","b","c"]`+tc.coverage+`}`)
		if res.Status != Decided || res.Grade != tc.grade || !slices.Equal(res.PredictionSet, tc.set) || res.SetNote != tc.note {
			t.Errorf("%q: %s, grade %s, set %v, note %q", tc.coverage, res.Status, res.Grade, res.PredictionSet, res.SetNote)
			continue
		}
		if tc.set != nil && (res.SetCoverage == nil || *res.SetCoverage != tc.level || res.SetOutcomes == nil || *res.SetOutcomes != 300) {
			t.Errorf("%q: set_coverage %v, set_outcomes %v", tc.coverage, res.SetCoverage, res.SetOutcomes)
		}
		if tc.set == nil && (res.SetCoverage != nil || res.SetOutcomes != nil) {
			t.Errorf("%q: a level or outcomes without a set", tc.coverage)
		}
	}
	for _, bad := range []string{`0.4`, `1`, `"0.9"`, `true`} {
		res := decide(t, g, `{"question":"Which?","options":["a","b","c"],"coverage":`+bad+`}`)
		if res.Error == nil || !strings.Contains(res.Error.Message, "coverage must be a number in [0.5,0.99]") {
			t.Errorf("coverage %s: %+v", bad, res.Error)
		}
	}
	// A yes/no question without a fit has no set, and the note says why.
	res := decide(t, g, `{"question":"Is it?","coverage":0.9}`)
	if res.PredictionSet != nil || !strings.Contains(res.SetNote, "no calibration fit") {
		t.Errorf("a noul without a fit: set %v, note %q", res.PredictionSet, res.SetNote)
	}
}

// Decide with coverage whose provider declined, or ranked none of the
// options, gave no probabilities to make a set of: the answer has no
// prediction_set, and set_note says why, as the contract says of every
// answer asked with coverage that has none.
func TestDecideCoverageOfADeclinedAnswerSaysWhy(t *testing.T) {
	d := fakeengine.StartDecisions(t, fakeengine.Reply{Model: "tiny", Probs: []float64{0.8, 0.2}, Abstain: true})
	fit := calibration.Fit{Model: "tiny", Kind: decision.Choice, Bucket: "2", Temperature: 1, N: 300, Sets: []calibration.Conformal{
		{Method: calibration.ConformalLAC, Coverage: 0.9, N: 300, Threshold: 0.5}}}
	path := writeFits(t, fit)
	g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\n  fits: %s\nnodes:\n  - {name: n1, url: %s, dialect: decisions, models: [tiny]}\nproviders:\n  - {name: openai, kind: engine, model: tiny}\n", path, d.URL))
	res := decide(t, g, `{"question":"Which?","options":["a","b"],"coverage":0.9}`)
	if res.Status != Abstained || res.Probabilities != nil || res.PredictionSet != nil || res.SetCoverage != nil || res.Grade != GradeEscalate {
		t.Fatalf("a refusal: %+v", res)
	}
	if !strings.Contains(res.SetNote, "no probabilities") {
		t.Errorf("coverage asked of a declined answer: set_note %q, want why there is no set", res.SetNote)
	}
	// Without coverage there is no note.
	if res := decide(t, g, `{"question":"Which?","options":["a","b"]}`); res.SetNote != "" {
		t.Errorf("no coverage asked, yet set_note %q", res.SetNote)
	}
}
