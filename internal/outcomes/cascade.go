package outcomes

import (
	"cmp"
	"context"
	"math/big"
	"slices"
	"time"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// CascadeReport is how a cascade (docs/cascades.md) did on the questions
// of a window that have outcomes: the share each stage answered, the
// error of the answers each kept with its bound, and the thresholds the
// fits certify for each.
type CascadeReport struct {
	Model       string  `json:"model"`
	TargetError float64 `json:"target_error"`
	// Delta is the risk each bound and certification is wrong.
	Delta float64 `json:"delta"`
	// Questions is how many questions with an outcome the cascade
	// answered in the window.
	Questions int `json:"questions"`
	// Decisions is how many requests (request ids) those questions came in.
	Decisions int           `json:"decisions"`
	Stages    []StageReport `json:"stages"`
	// CostPer1000 is what 1,000 decisions cost, in US dollars as an exact
	// decimal string (docs/http-api.md#cost): the recorded cost of every
	// stage asked on the report's questions, over Decisions, times 1,000.
	// LastStageCostPer1000 estimates the same for always asking the last
	// stage alone: its mean cost per question it was asked, times the
	// questions per decision the cascade had, times 1,000 (the questions
	// it was asked stand for all). Both are nil when any record's cost
	// is unknown (a node without a price), the estimate also when the
	// last stage was asked nothing. Each is rounded to the pico-dollar.
	CostPer1000          *string `json:"cost_per_1000"`
	LastStageCostPer1000 *string `json:"last_stage_cost_per_1000"`
	// Certified is set when every stage but the last has a certified
	// threshold for some build, kind and option bucket, and every stage
	// but the last kept answers whose bound is at most the target.
	Certified bool `json:"certified"`
}

// StageReport is one stage of a CascadeReport.
type StageReport struct {
	// Stage is the model as the cascade names it.
	Stage string `json:"stage"`
	// Asked is how many of the questions it was asked, Answered how many
	// it kept (the last stage keeps all it is asked), and Share
	// Answered over the cascade's Questions.
	Asked    int     `json:"asked"`
	Answered int     `json:"answered"`
	Share    float64 `json:"share"`
	// Wrong is how many of the answers it kept were wrong, Error their
	// share, and UpperBound the one-sided Clopper–Pearson bound at 1-Delta
	// on it (1 with no answer kept).
	Wrong      int     `json:"wrong"`
	Error      float64 `json:"error"`
	UpperBound float64 `json:"upper_bound"`
	// Thresholds are the escalation thresholds the fits hold for the
	// stage's model at the cascade's target, per build, kind and bucket.
	Thresholds []StageThreshold `json:"thresholds"`
}

// StageThreshold is a stage's escalation threshold for one build, kind
// and option bucket, as its fit holds it.
type StageThreshold struct {
	Fingerprint string `json:"fingerprint,omitempty"`
	Kind        string `json:"kind"`
	Bucket      string `json:"bucket"`
	calibration.Escalation
}

// ReportCascades reports every cascade on the labelled answers its
// stages gave between since and until (decisionlog.Log.CascadeLabelled),
// with the thresholds fits hold for its stages. resolve names the model a
// stage's name serves (an alias's target; nil: the name itself), which
// fits are kept by. It reads the window's cascade answers whole: a
// report, not a request path.
func ReportCascades(ctx context.Context, log *decisionlog.Log, fits *calibration.Fits, cascades []answer.Cascade, resolve func(string) string, since, until time.Time) ([]CascadeReport, error) {
	if log == nil || len(cascades) == 0 {
		return nil, nil
	}
	es, err := log.CascadeLabelled(ctx, since, until)
	if err != nil {
		return nil, err
	}
	out := make([]CascadeReport, 0, len(cascades))
	for _, c := range cascades {
		out = append(out, reportCascade(c, es, fits, resolve))
	}
	return out, nil
}

// reportCascade is c's report from the entries of every cascade's
// stages, each with its latest outcome; resolve as ReportCascades.
func reportCascade(c answer.Cascade, es []decisionlog.Entry, fits *calibration.Fits, resolve func(string) string) CascadeReport {
	rep := CascadeReport{Model: c.Model, TargetError: c.TargetError, Delta: calibration.EscalationDelta, Stages: make([]StageReport, len(c.Stages)), Certified: true}
	type qkey struct{ request, question string }
	// The last record of each question at each stage: a request id a
	// caller reused names its last decision, as feedback reads it.
	last := map[qkey]map[int]decisionlog.Entry{}
	var order []qkey
	for _, e := range es {
		if e.Cascade != c.Model || e.Stage < 0 || e.Stage >= len(c.Stages) || e.Outcome == nil || e.NoOptionFit() {
			continue
		}
		k := qkey{e.RequestID, e.QuestionID}
		if last[k] == nil {
			last[k] = map[int]decisionlog.Entry{}
			order = append(order, k)
		}
		// The stages of one decision are written in order: a stage no
		// later than one already read begins another decision under the
		// id, which replaces the earlier one's stages.
		for s := range last[k] {
			if s >= e.Stage {
				clear(last[k])
				break
			}
		}
		last[k][e.Stage] = e
	}
	lastStage := len(c.Stages) - 1
	var total, lastTotal decision.USD
	priced := true
	requests := map[string]bool{}
	for _, k := range order {
		stages := last[k]
		final := -1
		for s, e := range stages {
			final = max(final, s)
			rep.Stages[s].Asked++
			if e.Cost == nil {
				priced = false
				continue
			}
			total += *e.Cost
			if s == lastStage {
				lastTotal += *e.Cost
			}
		}
		rep.Questions++
		requests[k.request] = true
		e := stages[final]
		st := &rep.Stages[final]
		st.Answered++
		// Wrong as the stage's threshold was certified: a score's answer
		// is its expected level, not its most probable one.
		if p, ok := e.Prediction(e.Answered()); ok && len(p.Dist) == p.Options && p.Options > 0 && !p.Correct() {
			st.Wrong++
		}
	}
	rep.Decisions = len(requests)
	if priced && rep.Decisions > 0 {
		rep.CostPer1000 = perThousand(total, 1, rep.Decisions)
		if asked := rep.Stages[lastStage].Asked; asked > 0 {
			rep.LastStageCostPer1000 = perThousand(lastTotal, rep.Questions, asked*rep.Decisions)
		}
	}
	for i, name := range c.Stages {
		st := &rep.Stages[i]
		st.Stage = name
		st.UpperBound = 1
		if rep.Questions > 0 {
			st.Share = float64(st.Answered) / float64(rep.Questions)
		}
		if st.Answered > 0 {
			st.Error = float64(st.Wrong) / float64(st.Answered)
			st.UpperBound = fitting.ClopperPearsonUpper(st.Wrong, st.Answered, 1-calibration.EscalationDelta)
		}
		// Fits are kept by the model that answered, an alias's target.
		model := name
		if resolve != nil {
			model = resolve(name)
		}
		st.Thresholds = stageThresholds(fits, model, c.TargetError)
		if i < len(c.Stages)-1 {
			certified := slices.ContainsFunc(st.Thresholds, func(t StageThreshold) bool { return t.Certified })
			rep.Certified = rep.Certified && certified && st.UpperBound <= c.TargetError
		}
	}
	return rep
}

// perThousand is cost x num / den x 1,000 as a decimal string of
// dollars, rounded half up to the pico-dollar; in big integers, as a
// window's cost times 1,000 may pass an int64.
func perThousand(cost decision.USD, num, den int) *string {
	n := new(big.Int).Mul(big.NewInt(int64(cost)), big.NewInt(int64(num)*1000))
	d := big.NewInt(int64(den))
	n.Add(n, new(big.Int).Rsh(d, 1))
	s := decision.USD(n.Quo(n, d).Int64()).String()
	return &s
}

// stageThresholds are the escalations fits hold for model at target.
func stageThresholds(fits *calibration.Fits, model string, target float64) []StageThreshold {
	out := []StageThreshold{}
	if fits == nil {
		return out
	}
	for _, ft := range fits.Fits {
		if ft.Model != model {
			continue
		}
		if e, ok := ft.EscalationFor(target); ok {
			out = append(out, StageThreshold{Fingerprint: ft.Fingerprint, Kind: string(ft.Kind), Bucket: ft.Bucket, Escalation: e})
		}
	}
	slices.SortFunc(out, func(a, b StageThreshold) int {
		return cmp.Or(cmp.Compare(a.Fingerprint, b.Fingerprint), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Bucket, b.Bucket))
	})
	return out
}
