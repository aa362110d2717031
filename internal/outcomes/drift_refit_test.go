package outcomes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// A refit of an unchanged model is system1's change, not the model's:
// drift reads what the engine answered, before any calibrator, so the
// answers served under the adopted calibrator do not alarm against those
// served raw before it, however far the calibrator moved what was
// served. Drift on the served distributions alarmed here (the refit
// flattens an over-confident model's confidences).
func TestRefitRaisesNoDriftAlarm(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	// Four options, too sure by a temperature of 4.
	r := rand.New(rand.NewPCG(30, 0xd71f))
	cs := make([]labelledCase, 400)
	z := make([]float64, 4)
	for i := range cs {
		for j := range z {
			z[j] = r.NormFloat64()
		}
		z[r.IntN(4)] += 1.5
		cs[i] = labelledCase{kind: decision.Choice, dist: softmax(z, 4), expected: draw(r, softmax(z, 1)), at: now.Add(-3 * time.Hour)} // the reference window
	}
	l := openLog(t)
	record(t, l, "m", cs, inOrder(len(cs)))
	f := emptyFits(t)
	ds, _, err := f.Refit(ctx, NewTracker(l), RefitOptions{Seed: 1, Now: now})
	if err != nil || len(ds) != 1 || !ds[0].Adopted {
		t.Fatalf("refit: %+v %v", ds, err)
	}
	fits := f.Current()
	ft, ok := fits.Lookup("", "m", decision.Choice, 4)
	if !ok {
		t.Fatalf("no fit: %+v", fits)
	}
	// The same model answers the same kind of traffic in the current
	// hour, each answer calibrated by the fit as the answer path does.
	var moved float64
	for i, c := range cs {
		served := ft.Apply(c.dist)
		p := calibration.Prediction{Kind: decision.Choice, Dist: c.dist, Options: 4}
		q := calibration.Prediction{Kind: decision.Choice, Dist: served, Options: 4}
		moved += (p.Confidence() - q.Confidence()) / float64(len(cs))
		l.Record(decisionlog.Record{RequestID: fmt.Sprintf("after-%d", i), QuestionID: "q", Time: now.Add(-10 * time.Minute), Face: decisionlog.FaceSystemOne,
			Model: "m", Node: "n", Kind: decision.Choice, Options: options(decision.Choice, 4), EngineDist: c.dist,
			Steps: []decision.Step{{Name: decision.StepTemperature, Version: decision.CalibrationVersion(fits.Version, ft.Calibrator().String(), ft.Date, fits.Revision), Dist: served}}})
	}
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if moved < 0.05 {
		t.Fatalf("the fit %s moved the served confidence by %.3f only: this test could not tell", ft.Calibrator(), moved)
	}
	rep, err := ReportCalibrationWith(ctx, l, fits, ReportOptions{Since: now.Add(-7 * 24 * time.Hour), Until: now, Drift: DriftOptions{Window: time.Hour, Reference: 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drift) != 1 {
		t.Fatalf("drift %+v", rep.Drift)
	}
	d := rep.Drift[0]
	if d.Alarm || d.Reference != len(cs) || d.Current != len(cs) {
		t.Errorf("a refit of an unchanged model (served confidence down %.3f by %s): %+v", moved, ft.Calibrator(), d)
	}
	t.Logf("served confidence down %.3f by %s; drift PSI %.3f (confidence %.3f, labels %.3f)", moved, ft.Calibrator(), d.PSI, d.ConfidencePSI, d.LabelPSI)
}
