package answer

import (
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fleet"
)

// The report calibrates by the fits, sums usage and collects warnings in
// question order, the same for every face.
func TestReport(t *testing.T) {
	req := Request{Request: decision.Request{Model: "m", Questions: []decision.Question{
		{ID: "q1", Kind: decision.Choice, Options: make([]decision.Option, 3)},
		{ID: "q2", Kind: decision.Noul, Options: make([]decision.Option, 2)},
	}}}
	res := &fleet.Result{Model: "m", Questions: []fleet.Answered{
		{Outcome: engine.Outcome{Dist: decision.Distribution{0.7, 0.2, 0.1}, Model: "m", InputTokens: 10, OutputTokens: 1, Missing: []string{"c"}}},
		{Outcome: engine.Outcome{Dist: decision.Distribution{0.6, 0.4}, Model: "m", InputTokens: 5, OutputTokens: 1, Estimated: true}},
	}}
	a := report(req, res, nil)
	if a.Calibrated || a.Usage != (Usage{15, 2, true}) || len(a.Warnings) != 1 || !strings.HasPrefix(a.Warnings[0].String(), "q1: options c were not") || a.Questions[0].Dist[0] != 0.7 {
		t.Fatalf("without fits: %+v", a)
	}
	fits := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 2, N: 50}}}
	a = report(req, res, fits)
	if a.Calibrated || len(a.Warnings) != 2 || !strings.Contains(a.Warnings[1].String(), "q2: no calibration fit") || a.Questions[0].Dist[0] >= 0.7 || a.Fits != fits {
		t.Fatalf("with a fit for the choice only: %+v", a)
	}
}

// Whatever the node, a distribution that is not one over the question's
// options is malformed, and the request is not answered.
func TestCheckRefusesWhatIsNotADistribution(t *testing.T) {
	req := decision.Request{Questions: []decision.Question{{ID: "q", Kind: decision.Choice, Options: make([]decision.Option, 2)}}}
	s := New(Options{})
	for _, c := range []struct {
		d        decision.Distribution
		declined string
		good     bool
	}{{decision.Distribution{0.5, 0.5}, "", true}, {decision.Distribution{0.5, 0.4}, "", false}, {decision.Distribution{1}, "", false},
		{decision.Distribution{0.5, 0.5, 0}, "", false}, {decision.Distribution{1.5, -0.5}, "", false},
		// A question the node declined outright has no reading to check;
		// one it answered without a reading is malformed.
		{nil, "the endpoint refused to answer it", true}, {nil, "", false},
		{decision.Distribution{0.5, 0.4}, "declined, but its reading is still checked", false}} {
		d := c.d
		var declined *Refusal
		if c.declined != "" {
			declined = &Refusal{Reason: RefusedUpstream, Detail: c.declined}
		}
		f := s.check(req, []*Refusal{declined}, &Answer{Questions: []Question{{Dist: d, Node: "n"}}})
		if (f == nil) != c.good || (f != nil && (f.Class != NoAnswer || f.Problems[0].Class != Malformed || !strings.Contains(f.Error(), "node n: the answer failed the checks"))) {
			t.Errorf("%v: %+v", d, f)
		}
	}
}

// A set the fit cannot give is told why truly: the levels its sets reach,
// and the outcomes the level asked needs only where the fit has fewer.
func TestPredictionSetNoteWhenNoSetReaches(t *testing.T) {
	ft := calibration.Fit{Sets: []calibration.Conformal{{Method: calibration.ConformalLAC, Coverage: 0.98, N: 70, Threshold: 0.9}}}
	for _, c := range []struct {
		coverage float64
		note     string
	}{
		// 66 outcomes would do for 0.985, but no set is built for it.
		{0.985, "the fit's sets reach coverage 0.98 at most, on 70 outcomes; none is built for coverage 0.985"},
		{0.99, "the fit's sets reach coverage 0.98 at most, on 70 outcomes; none is built for coverage 0.99, which needs at least 99"},
	} {
		if s := predictionSet(true, true, ft, decision.Distribution{0.5, 0.5}, c.coverage); s == nil || s.Note != c.note {
			t.Errorf("coverage %v: %+v, want the note %q", c.coverage, s, c.note)
		}
	}
}
