package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"system1/internal/cases"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/outcomes"
	"system1/internal/pause"
)

// A min_label_mass chosen from outcomes, on the simulated model: decide
// answers half the held-out in-scope and near out-of-scope states with no
// gate, each recorded in a real decision log; feedback says which option
// was right, or "none" for the out-of-scope ones; the calibration report
// suggests a gate from those outcomes (the highest whose in-scope loss
// stays under a target by a Clopper–Pearson bound: the default 5%, and
// 25%); the other half, asked with the gate at 25%, flags more of the
// out-of-scope states than it loses of the in-scope ones.
func TestLabelMassGateFromOutcomes(t *testing.T) {
	b := bankingOnSimulatedModel(t)
	dir := t.TempDir()
	dlog, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: filepath.Join(dir, "decisions.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dlog.Close(context.Background()) })
	cfg, err := config.Parse([]byte(b.config()))
	if err != nil {
		t.Fatal(err)
	}
	g := build(t, Options{Config: cfg, StatePath: filepath.Join(dir, pause.FileName), Version: "test"}, dlog)
	if errs := g.ConfigErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	halves := func(cs []cases.Case) (early, late []cases.Case) {
		for i, c := range cs {
			if i%2 == 0 {
				early = append(early, c)
			} else {
				late = append(late, c)
			}
		}
		return early, late
	}
	inEarly, inLate := halves(b.inHeld)
	nearEarly, nearLate := halves(b.nearHeld)

	since := time.Now().Add(-time.Minute)
	var items []outcomes.FeedbackItem
	for _, grp := range []struct {
		cs      []cases.Case
		inScope bool
	}{{inEarly, true}, {nearEarly, false}} {
		for _, c := range grp.cs {
			id := "early-" + c.ID
			if res := b.asked.decide(t, g, c.Request.State, fmt.Sprintf(`,"request_id":%q`, id)); res.LabelMass == nil {
				t.Fatalf("%s: no label_mass", c.ID)
			}
			outcome, _ := json.Marshal(decisionlog.NoneFit)
			if grp.inScope {
				outcome, _ = json.Marshal(b.asked.options[c.Expected[0]])
			}
			items = append(items, outcomes.FeedbackItem{RequestID: id, Outcome: outcome})
		}
	}
	if res := outcomes.NewFeedback(dlog).Record(t.Context(), items); res.Error != nil || len(res.Recorded) != len(items) {
		t.Fatalf("feedback: %+v", res.Error)
	}
	// The default target, 5%: with about 80 in-scope outcomes the bound
	// allows none lost, so the gate is the least in-scope mass seen.
	until := time.Now().Add(time.Second)
	def, err := outcomes.ReportCalibrationWith(t.Context(), dlog, nil, outcomes.ReportOptions{Since: since, Until: until})
	if err != nil || len(def.LabelMass) != 1 {
		t.Fatalf("report %+v, %v", def.LabelMass, err)
	}
	rep, err := outcomes.ReportCalibrationWith(t.Context(), dlog, nil, outcomes.ReportOptions{Since: since, Until: until, MaxInScopeLoss: 0.25})
	if err != nil || len(rep.LabelMass) != 1 {
		t.Fatalf("report %+v, %v", rep.LabelMass, err)
	}
	for _, mg := range []outcomes.LabelMassGate{def.LabelMass[0], rep.LabelMass[0]} {
		if mg.Model != "tiny" || mg.InScope != len(inEarly) || mg.OutOfScope != len(nearEarly) || mg.MinLabelMass == nil || mg.Flagged == nil || !(mg.UpperBound < mg.MaxInScopeLoss) {
			t.Fatalf("suggested %+v from %d in-scope and %d out-of-scope outcomes", mg, len(inEarly), len(nearEarly))
		}
		t.Logf("from %d in-scope and %d out-of-scope outcomes, at most %.2f in scope lost: min_label_mass %v (%d in scope lost, bound %.4f; %.3f of the out-of-scope flagged)",
			mg.InScope, mg.OutOfScope, mg.MaxInScopeLoss, *mg.MinLabelMass, mg.InScopeLost, mg.UpperBound, *mg.Flagged)
	}
	if d := def.LabelMass[0]; d.MaxInScopeLoss != 0.05 || *d.MinLabelMass > *rep.LabelMass[0].MinLabelMass {
		t.Errorf("at 5%% the gate %v (target %v) is above the one at 25%% (%v)", *d.MinLabelMass, d.MaxInScopeLoss, *rep.LabelMass[0].MinLabelMass)
	}
	mg := rep.LabelMass[0]
	gate := *mg.MinLabelMass

	share := func(cs []cases.Case) float64 {
		n := 0
		for _, c := range cs {
			res := b.asked.decide(t, g, c.Request.State, fmt.Sprintf(`,"min_label_mass":%v`, gate))
			if res.Status == Abstained {
				n++
			}
		}
		return float64(n) / float64(len(cs))
	}
	lost, near, far := share(inLate), share(nearLate), share(b.far)
	t.Logf("the other half asked with min_label_mass %v: %.3f of %d in-scope answers lost, %.3f of %d near and %.3f of %d far out-of-scope states flagged",
		gate, lost, len(inLate), near, len(nearLate), far, len(b.far))
	if !(near > lost) || !(far > lost) {
		t.Errorf("the suggested gate %v flagged %.3f near and %.3f far out-of-scope states, no more than the %.3f of in-scope answers it lost", gate, near, far, lost)
	}
}
