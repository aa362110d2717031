package decisionlog

import (
	"strconv"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/fakeengine"
	"system1/internal/simmodel"
	"system1/internal/testengine"
)

// The pieces of the loop together, without the core: traffic from the
// simulated model is logged, outcomes come back, a refit from the log is
// adopted because it lowers held-out NLL, and later traffic tempered by it
// has lower ECE and NLL than before.
func TestLoopFromTheLogLowersECE(t *testing.T) {
	path := testengine.SharedData(t, "agnews-dev.jsonl")
	all, err := cases.ReadFiles(0, path)
	if err != nil {
		t.Fatal(err)
	}
	train, traffic := simmodel.Split(all, 0.5)
	m, err := simmodel.Train(train, simmodel.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: m.Behavior()})
	defer f.Close()
	eng := &llamacpp.Engine{BaseURL: f.URL}
	ctx := ctxT(t)
	l := openLog(t, Options{Path: sqlitePath(t)})

	// serve answers cs, tempering by temp (1: none) as a step, logs each
	// answer and returns the served predictions.
	serve := func(cs []cases.Case, temp float64, version string) []calibration.Prediction {
		var out []calibration.Prediction
		for _, c := range cs {
			q := c.Request.Questions[0]
			start := time.Now()
			o, err := engine.Ask(ctx, eng, fakeengine.DefaultModel, c.Request.State, q)
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]string, len(q.Options))
			for i, op := range q.Options {
				keys[i] = op.Key
			}
			r := Record{RequestID: "req_" + c.ID, QuestionID: q.ID, Face: FaceSystemOne, Model: "sim", Node: "fake",
				Kind: q.Kind, Options: keys, EngineDist: o.Dist, LabelMass: &o.Mass, Latency: time.Since(start), State: c.Request.State}
			final := o.Dist
			if temp != 1 {
				final = o.Dist.Temper(temp)
				r.Steps = []Step{{Name: decision.StepTemperature, Version: version, Dist: final}}
			}
			l.Record(r)
			out = append(out, calibration.Prediction{Kind: q.Kind, Dist: final, Expected: c.Expected[0], Options: len(keys)})
		}
		return out
	}
	early, late := traffic[:len(traffic)/2], traffic[len(traffic)/2:]
	before := fitting.Measure(serve(early, 1, ""))
	for _, c := range early {
		q := c.Request.Questions[0]
		if _, err := l.Outcome(ctx, "req_"+c.ID, q.ID, q.Options[c.Expected[0]].Key); err != nil {
			t.Fatal(err)
		}
	}

	groups, err := l.Labelled(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), "sim")
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Kind != decision.Choice || groups[0].Bucket != "3-4" || len(groups[0].Entries) != len(early) {
		t.Fatalf("groups %+v", groups)
	}
	sel, err := fitting.Select(groups[0].Predictions(Entry.Uncalibrated), calibration.Identity(), fitting.SelectOptions{Seed: 1, Methods: []string{calibration.MethodNone, calibration.MethodTemperature}})
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Adopt || sel.Calibrator.Method != calibration.MethodTemperature {
		t.Fatalf("refit not adopted: %s", sel.Reason)
	}
	temp := sel.Calibrator.Temperature

	lateRaw := fitting.Measure(serve(late, 1, ""))
	lateCal := fitting.Measure(serve(late, temp, "refit-"+strconv.Itoa(1)))
	t.Logf("early traffic %d: ECE %.3f NLL %.3f; refit T=%.2f (%s); later traffic %d: ECE %.3f -> %.3f, NLL %.3f -> %.3f",
		len(early), before.ECE, before.NLL, temp, sel.Reason, len(late), lateRaw.ECE, lateCal.ECE, lateRaw.NLL, lateCal.NLL)
	if !(lateCal.ECE < lateRaw.ECE) || !(lateCal.NLL < lateRaw.NLL) {
		t.Fatalf("the refit did not help later traffic: ECE %.3f -> %.3f, NLL %.3f -> %.3f", lateRaw.ECE, lateCal.ECE, lateRaw.NLL, lateCal.NLL)
	}
	// Outcomes for later traffic land on its latest (tempered) answer,
	// which names its step's version.
	for _, c := range late {
		q := c.Request.Questions[0]
		if _, err := l.Outcome(ctx, "req_"+c.ID, q.ID, q.Options[c.Expected[0]].Key); err != nil {
			t.Fatal(err)
		}
	}
	es, err := l.Lookup(ctx, "req_"+late[0].ID)
	if err != nil || len(es) != 2 || es[1].Steps[0].Version != "refit-1" || es[1].Outcome == nil {
		t.Fatalf("the later answers as logged: %+v, %v", es, err)
	}
}
