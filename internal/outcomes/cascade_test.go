package outcomes

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// A cascade's report counts each question once, at the last stage that
// answered it, and bounds each stage's error on the answers it kept.
func TestReportCascade(t *testing.T) {
	c := answer.Cascade{Model: "casc", Stages: []string{"small", "large"}, TargetError: 0.05}
	entry := func(req string, stage int, final []float64, outcome string) decisionlog.Entry {
		e := decisionlog.Entry{Record: decisionlog.Record{RequestID: req, QuestionID: "q", Cascade: "casc", Stage: stage,
			Model: c.Stages[stage], Options: []string{"a", "b"}, Final: final}}
		e.Outcome = &decisionlog.Outcome{Value: outcome}
		return e
	}
	es := []decisionlog.Entry{
		entry("r1", 0, []float64{0.9, 0.1}, "a"), // kept by small, right
		entry("r2", 0, []float64{0.9, 0.1}, "b"), // kept by small, wrong
		entry("r3", 0, []float64{0.6, 0.4}, "b"), // escalated
		entry("r3", 1, []float64{0.2, 0.8}, "b"), // large, right
		entry("r4", 0, []float64{0.6, 0.4}, decisionlog.NoneFit),
		{Record: decisionlog.Record{RequestID: "r5", QuestionID: "q", Cascade: "other", Options: []string{"a", "b"}, Final: []float64{1, 0}},
			Outcome: &decisionlog.Outcome{Value: "a"}},
	}
	fits := &calibration.Fits{Fits: []calibration.Fit{{Model: "small", Fingerprint: "fp", Kind: "choice", Bucket: "2", Temperature: 1,
		Escalations: []calibration.Escalation{{TargetError: 0.05, Delta: 0.05, Threshold: 0.8, Certified: true}}}}}
	rep := reportCascade(c, es, fits, nil)
	tests := []struct {
		name      string
		got, want any
	}{
		{"questions", rep.Questions, 3},
		{"small asked", rep.Stages[0].Asked, 3},
		{"small answered", rep.Stages[0].Answered, 2},
		{"small wrong", rep.Stages[0].Wrong, 1},
		{"small error", rep.Stages[0].Error, 0.5},
		{"small bound", rep.Stages[0].UpperBound, fitting.ClopperPearsonUpper(1, 2, 0.95)},
		{"large asked", rep.Stages[1].Asked, 1},
		{"large answered", rep.Stages[1].Answered, 1},
		{"large share", rep.Stages[1].Share, 1.0 / 3},
		{"small thresholds", len(rep.Stages[0].Thresholds), 1},
		{"large thresholds", len(rep.Stages[1].Thresholds), 0},
		// small's threshold is certified, but its kept answers' bound is
		// over the target.
		{"certified", rep.Certified, false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// A stage named by an alias is reported with the thresholds of the model
// it serves, which the fits are kept by (its answers are recorded under
// that model): certified where its threshold and kept answers are.
func TestReportCascadeAliasStage(t *testing.T) {
	c := answer.Cascade{Model: "casc", Stages: []string{"fast", "large"}, TargetError: 0.05}
	var es []decisionlog.Entry
	for i := range 60 { // 60 right answers kept: a bound under 0.05
		e := decisionlog.Entry{Record: decisionlog.Record{RequestID: fmt.Sprint("r", i), QuestionID: "q", Cascade: "casc", Stage: 0,
			Model: "small", Options: []string{"a", "b"}, Final: []float64{0.9, 0.1}}}
		e.Outcome = &decisionlog.Outcome{Value: "a"}
		es = append(es, e)
	}
	fits := &calibration.Fits{Fits: []calibration.Fit{{Model: "small", Kind: "choice", Bucket: "2", Temperature: 1,
		Escalations: []calibration.Escalation{{TargetError: 0.05, Delta: 0.05, Threshold: 0.8, Certified: true}}}}}
	aliases := map[string]string{"fast": "small"}
	rep := reportCascade(c, es, fits, func(m string) string { return cmp.Or(aliases[m], m) })
	if len(rep.Stages[0].Thresholds) != 1 || !rep.Certified {
		t.Errorf("stage fast (small): thresholds %+v, certified %v; want small's one, certified", rep.Stages[0].Thresholds, rep.Certified)
	}
}

// A refit told the cascades' targets writes, in each fit, the escalation
// threshold certified at each, learnt on the answers as served.
func TestRefitCertifiesEscalations(t *testing.T) {
	l := openLog(t)
	cs := banking12Like(480, 12)
	record(t, l, "m", cs, inOrder(len(cs)))
	f := emptyFits(t)
	ds, _, err := f.Refit(context.Background(), NewTracker(l), RefitOptions{Seed: 1, EscalationTargets: []float64{0.05, 0.3}})
	if err != nil || len(ds) != 1 || !ds[0].Written {
		t.Fatalf("refit: %+v %v", ds, err)
	}
	ft := f.Current().Fits[0]
	if len(ft.Escalations) != 2 {
		t.Fatalf("escalations %+v", ft.Escalations)
	}
	for _, target := range []float64{0.05, 0.3} {
		e, ok := ft.EscalationFor(target)
		if !ok || e.N != len(cs) || (e.Certified && e.UpperBound > target) {
			t.Errorf("at %v: %+v", target, e)
		}
	}
	// A looser target is certified at a threshold no stricter.
	strict, _ := ft.EscalationFor(0.05)
	loose, _ := ft.EscalationFor(0.3)
	if !loose.Certified || (strict.Certified && strict.Threshold < loose.Threshold) {
		t.Errorf("0.05: %+v; 0.3: %+v", strict, loose)
	}
}

// A cascade's cost per 1,000 decisions sums every stage's recorded cost
// over the report's questions; always asking the last stage is its mean
// cost per question asked times the cascade's questions per decision.
// An unknown cost leaves both unknown.
func TestReportCascadeCost(t *testing.T) {
	c := answer.Cascade{Model: "casc", Stages: []string{"small", "large"}, TargetError: 0.05}
	small, large := decision.USD(100_000_000), decision.USD(1_000_000_000) // $0.0001, $0.001
	entry := func(req, q string, stage int, cost *decision.USD) decisionlog.Entry {
		return decisionlog.Entry{Record: decisionlog.Record{RequestID: req, QuestionID: q, Cascade: "casc", Stage: stage,
			Model: c.Stages[stage], Options: []string{"a", "b"}, Final: []float64{0.9, 0.1}, Cost: cost},
			Outcome: &decisionlog.Outcome{Value: "a"}}
	}
	// Three decisions of five questions: small asked all five, large two.
	priced := []decisionlog.Entry{
		entry("r1", "q", 0, &small),
		entry("r1", "q2", 0, &small), entry("r1", "q2", 1, &large),
		entry("r2", "q", 0, &small),
		entry("r2", "q2", 0, &small),
		entry("r3", "q", 0, &small), entry("r3", "q", 1, &large),
	}
	// A question with no option fitting is not in the report, nor its cost.
	noneFit := entry("r4", "q", 0, nil)
	noneFit.Outcome.Value = decisionlog.NoneFit
	str := func(s string) *string { return &s }
	tests := []struct {
		name            string
		es              []decisionlog.Entry
		decisions       int
		cascade, always *string
	}{
		// (5 x 0.0001 + 2 x 0.001) / 3 x 1000 = 0.8333…; 0.001 x 5/3 x 1000 = 1.6666…
		{"priced", append(slices.Clone(priced), noneFit), 3, str("0.833333333333"), str("1.666666666667")},
		{"an unpriced stage", append(slices.Clone(priced), entry("r5", "q", 0, nil)), 4, nil, nil},
		// large never asked: 2 x 0.0001 / 2 x 1000 = 0.1.
		{"last stage not asked", []decisionlog.Entry{entry("r1", "q", 0, &small), entry("r2", "q", 0, &small)}, 2, str("0.1"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := reportCascade(c, tt.es, nil, nil)
			if rep.Decisions != tt.decisions {
				t.Errorf("decisions %d, want %d", rep.Decisions, tt.decisions)
			}
			show := func(s *string) string {
				if s == nil {
					return "nil"
				}
				return *s
			}
			if show(rep.CostPer1000) != show(tt.cascade) || show(rep.LastStageCostPer1000) != show(tt.always) {
				t.Errorf("cost per 1,000 %s, always the last stage %s; want %s, %s",
					show(rep.CostPer1000), show(rep.LastStageCostPer1000), show(tt.cascade), show(tt.always))
			}
		})
	}
}

// A stage's kept answer is wrong as its escalation threshold was
// certified on (calibration.Prediction.Correct): a score's answer is its
// expected level rounded, not its most probable level, and a noul's
// even split is true.
func TestReportCascadeWrongAsCertified(t *testing.T) {
	c := answer.Cascade{Model: "casc", Stages: []string{"small", "large"}, TargetError: 0.05}
	tests := []struct {
		name    string
		kind    decision.Kind
		options []string
		final   []float64
		outcome string
		wrong   int
	}{
		// Expected level 1 (0.1 + 2 x 0.45): the answer is level 1, right,
		// though levels 0 and 2 are the most probable.
		{"score right at its expected level", decision.Score, []string{"0", "1", "2"}, []float64{0.45, 0.1, 0.45}, "1", 0},
		// Expected level 0.85 rounds to 1: the answer is level 1, wrong,
		// though level 0 is the most probable.
		{"score wrong though its mode is right", decision.Score, []string{"0", "1", "2"}, []float64{0.4, 0.35, 0.25}, "0", 1},
		{"choice right", decision.Choice, []string{"a", "b"}, []float64{0.9, 0.1}, "a", 0},
		{"choice wrong", decision.Choice, []string{"a", "b"}, []float64{0.9, 0.1}, "b", 1},
		{"noul even split is true", decision.Noul, []string{"true", "false"}, []float64{0.5, 0.5}, "true", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := decisionlog.Entry{Record: decisionlog.Record{RequestID: "r1", QuestionID: "q", Cascade: "casc", Stage: 0,
				Model: "small", Kind: tt.kind, Options: tt.options, Final: tt.final},
				Outcome: &decisionlog.Outcome{Value: tt.outcome}}
			rep := reportCascade(c, []decisionlog.Entry{e}, nil, nil)
			if got := rep.Stages[0].Wrong; got != tt.wrong {
				t.Errorf("small wrong %d, want %d (error %v)", got, tt.wrong, rep.Stages[0].Error)
			}
		})
	}
}

// A request id a caller reused names its last decision, as feedback
// reads it: the report counts the question where that decision was
// kept, not at the last stage an earlier decision under the id reached.
func TestReportCascadeReusedRequestID(t *testing.T) {
	c := answer.Cascade{Model: "casc", Stages: []string{"small", "large"}, TargetError: 0.05}
	cost := decision.USD(1_000_000)
	entry := func(stage int, final []float64) decisionlog.Entry {
		e := decisionlog.Entry{Record: decisionlog.Record{RequestID: "r1", QuestionID: "q", Cascade: "casc", Stage: stage,
			Model: c.Stages[stage], Options: []string{"a", "b"}, Final: final, Cost: &cost}}
		e.Outcome = &decisionlog.Outcome{Value: "a"}
		return e
	}
	for _, tt := range []struct {
		name                  string
		es                    []decisionlog.Entry
		stagesAsked, answered [2]int
	}{
		{"escalated, then kept by small", []decisionlog.Entry{entry(0, []float64{0.6, 0.4}), entry(1, []float64{0.9, 0.1}), entry(0, []float64{0.95, 0.05})},
			[2]int{1, 0}, [2]int{1, 0}},
		{"kept by small, then escalated", []decisionlog.Entry{entry(0, []float64{0.95, 0.05}), entry(0, []float64{0.6, 0.4}), entry(1, []float64{0.9, 0.1})},
			[2]int{1, 1}, [2]int{0, 1}},
		{"escalated twice", []decisionlog.Entry{entry(0, []float64{0.6, 0.4}), entry(1, []float64{0.9, 0.1}), entry(0, []float64{0.6, 0.4}), entry(1, []float64{0.9, 0.1})},
			[2]int{1, 1}, [2]int{0, 1}},
	} {
		rep := reportCascade(c, tt.es, nil, nil)
		deref := func(p *string) string {
			if p == nil {
				return "null"
			}
			return *p
		}
		asked := [2]int{rep.Stages[0].Asked, rep.Stages[1].Asked}
		answered := [2]int{rep.Stages[0].Answered, rep.Stages[1].Answered}
		if rep.Questions != 1 || asked != tt.stagesAsked || answered != tt.answered {
			t.Errorf("%s: %d questions, asked %v, answered %v; want 1, %v, %v", tt.name, rep.Questions, asked, answered, tt.stagesAsked, tt.answered)
		}
		if want := decision.USD(int64(cost) * int64(tt.stagesAsked[0]+tt.stagesAsked[1]) * 1000).String(); rep.CostPer1000 == nil || *rep.CostPer1000 != want {
			t.Errorf("%s: cost per 1,000 %v, want %s", tt.name, deref(rep.CostPer1000), want)
		}
	}
}
