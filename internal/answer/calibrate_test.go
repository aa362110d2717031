package answer_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/engine"
	"system1/internal/fleet"
)

// A fit calibrates by its whole calibrator: a temperature with a bias per
// position for a vector fit (a temperature alone would lose the biases),
// named as applied in the step's version; and a request that asks for a
// coverage gets each question's prediction set from the fit's sets (of
// the distribution before the calibrator), or a note saying why there is
// none.
func TestAnswerAppliesTheFitsCalibratorAndSets(t *testing.T) {
	r, e := leaningRouter(t, fleet.Prior{})
	q := colourQuestion("red", "green", "blue")
	vector := calibration.Calibrator{Method: calibration.MethodVector, Temperature: 2, Biases: []float64{-1, 0, 0.5}}
	ft := calibration.Fit{Model: "m", Kind: decision.Choice, Bucket: "3-4", N: 200}
	ft.SetCalibrator(vector)
	ft.Sets = []calibration.Conformal{
		{Method: calibration.ConformalLAC, Coverage: 0.8, N: 200, Threshold: 0.75},
		{Method: calibration.ConformalLAC, Coverage: 0.9, N: 200, Threshold: 0.9},
	}
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r1", Fits: []calibration.Fit{ft}}
	svc := answer.New(answer.Options{Router: r, Fits: func() *calibration.Fits { return fits }})
	state := json.RawMessage(`"about red"`)
	ask := func(coverage float64) answer.Question {
		t.Helper()
		a, err := svc.Answer(context.Background(), answer.Request{Request: decision.Request{Model: "m", State: state, Questions: []decision.Question{q}},
			Face: decisionlog.FaceSystemOne, RequestID: "r", Coverage: coverage})
		if err != nil {
			t.Fatal(err)
		}
		return a.Questions[0]
	}
	a := ask(0)
	direct, err := engine.Ask(context.Background(), e, "m", state, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := vector.Apply(direct.Dist); !near(a.Dist, want) || near(a.Dist, direct.Dist.Temper(2)) {
		t.Errorf("answered %v; the vector fit gives %v (its temperature alone %v)", a.Dist, want, direct.Dist.Temper(2))
	}
	if got := decision.StepNames(a.Steps); !slices.Equal(got, []string{"temperature=v1/T=2/b=-1,0,+0.5@r1"}) {
		t.Errorf("steps %v", got)
	}
	if a.Set != nil {
		t.Errorf("a set without a coverage asked: %+v", a.Set)
	}
	for _, c := range []struct {
		coverage float64
		level    float64
		note     string
	}{
		{0.9, 0.9, ""},
		{0.85, 0.9, ""}, // the least level at or above the one asked
		{0.8, 0.8, ""},
		{0.95, 0, "the fit's sets reach coverage 0.9 at most, on 200 outcomes; none is built for coverage 0.95"},
	} {
		s := ask(c.coverage).Set
		if s == nil || s.Note != c.note || s.Coverage != c.level {
			t.Errorf("coverage %v: set %+v", c.coverage, s)
			continue
		}
		if c.note != "" {
			if s.Options != nil {
				t.Errorf("coverage %v: options %v with a note", c.coverage, s.Options)
			}
			continue
		}
		// The rule is of the distribution before the fit's calibrator.
		rule, _ := ft.SetFor(c.coverage)
		if want := rule.Set(direct.Dist); !slices.Equal(s.Options, want) || s.Outcomes != 200 || s.Method != calibration.ConformalLAC {
			t.Errorf("coverage %v: set %+v, want options %v", c.coverage, s, want)
		}
	}
	// No fit for the model: no outcomes to build a set on, said so.
	other := answer.New(answer.Options{Router: r, Fits: func() *calibration.Fits {
		return &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{}}
	}})
	b, err := other.Answer(context.Background(), answer.Request{Request: decision.Request{Model: "m", State: state, Questions: []decision.Question{q}}, Coverage: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Questions[0].Set; s == nil || s.Options != nil || !strings.Contains(s.Note, "no calibration fit") {
		t.Errorf("no fit: set %+v", s)
	}
	// A file with no fit yet (a learning loop's start) changes nothing:
	// uncalibrated, and no warning of a fit missed.
	if b.Calibrated || len(b.Warnings) != 0 {
		t.Errorf("an empty fits file: calibrated %v, warnings %v", b.Calibrated, b.Warnings)
	}
}
