package answer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// A cascade's answer is calibrated when every answer it kept was: a
// first stage with no fit escalates every question (uncertified:
// escalate), and the last stage's calibrated answers are not called
// uncalibrated for the stage whose answers were dropped. One stage that
// kept an uncalibrated answer makes the cascade's uncalibrated, with its
// warning.
func TestCascadeCalibratedByTheAnswersKept(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"small", "big"}, Behavior: fakeengine.Behavior{Prompted: fakeengine.Leaning}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{"small", "big"}, MaxOptions: 20, PinSlots: new(bool)}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := fleet.New([]*fleet.Node{n}, fleet.Options{})
	big := calibration.Fit{Model: "big", Kind: decision.Choice, Bucket: "3-4", N: 200}
	big.SetCalibrator(calibration.Calibrator{Method: calibration.MethodTemperature, Temperature: 2})
	fits := &calibration.Fits{Version: calibration.FitsVersion, Revision: "r1", Fits: []calibration.Fit{big}}
	for _, tt := range []struct {
		name       string
		keep       bool
		fits       *calibration.Fits
		stage      string
		calibrated bool
		warnings   int
	}{
		{"escalated past the stage with no fit", false, fits, "big", true, 0},
		{"kept by the stage with no fit", true, fits, "small", false, 1},
		{"no fits loaded", false, nil, "big", false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := answer.New(answer.Options{Router: r, Fits: func() *calibration.Fits { return tt.fits },
				Cascades: []answer.Cascade{{Model: "c", Stages: []string{"small", "big"}, TargetError: 0.05, Keep: tt.keep}}})
			a, err := svc.Answer(context.Background(), answer.Request{Request: decision.Request{Model: "c", State: json.RawMessage(`"about red"`),
				Questions: []decision.Question{colourQuestion("red", "green", "blue")}}, Face: decisionlog.FaceSystemOne, RequestID: "r"})
			if err != nil {
				t.Fatal(err)
			}
			if a.Questions[0].Stage != tt.stage || a.Calibrated != tt.calibrated || len(a.Warnings) != tt.warnings {
				t.Errorf("answered by %s, calibrated %v, warnings %+v; want %s, %v, %d", a.Questions[0].Stage, a.Calibrated, a.Warnings, tt.stage, tt.calibrated, tt.warnings)
			}
		})
	}
}
