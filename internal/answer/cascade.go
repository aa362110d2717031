package answer

import (
	"context"
	"math"
	"slices"
	"strings"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fleet"
)

// Cascade is a model made of others (docs/cascades.md): each question of
// a request is asked of the first stage and kept when its calibrated
// confidence clears the threshold certified for that stage (its model,
// build, kind and option bucket: the fit's Escalations) at TargetError;
// the questions not kept are asked of the next stage together, in one
// request. The last stage's answers are kept as they are, refusals
// included.
type Cascade struct {
	Model       string
	Stages      []string
	TargetError float64
	// Keep keeps the answers of a stage with no certified threshold;
	// otherwise they escalate.
	Keep bool
}

// Cascades are the cascades the service answers to.
func (s *Service) Cascades() []Cascade { return s.opt.Cascades }

// Resolve is the model the fleet serves for model: an alias's target, or
// model itself.
func (s *Service) Resolve(model string) string {
	if s.opt.Router == nil {
		return model
	}
	return s.opt.Router.Resolve(model)
}

// cascade is the cascade named model, if one is.
func (s *Service) cascade(model string) (Cascade, bool) {
	i := slices.IndexFunc(s.opt.Cascades, func(c Cascade) bool { return c.Model == model })
	if i < 0 {
		return Cascade{}, false
	}
	return s.opt.Cascades[i], true
}

// cascadeLimits are the limits of c, every stage's by limits: a request
// is only as large as the strictest stage takes, since any question may
// reach any stage.
func cascadeLimits(c Cascade, limits func(string) (decision.Limits, error)) (decision.Limits, error) {
	var lim decision.Limits
	for i, st := range c.Stages {
		l, err := limits(st)
		if err != nil {
			return decision.DefaultLimits(), err
		}
		if i == 0 {
			lim = l
			continue
		}
		lim = lim.Intersect(l)
	}
	return lim, nil
}

// answerCascade answers req, whose model is the cascade c, stage by
// stage. Each stage is asked through Answer as a request of its own model
// under the same request id, so its answers are cached, shadowed and
// recorded as any (each record naming the cascade and its stage), and
// feedback on the question reaches every stage that answered it. A
// stage's failure is the cascade's.
func (s *Service) answerCascade(ctx context.Context, req Request, c Cascade) (*Answer, error) {
	n := len(req.Questions)
	out := &Answer{Model: c.Model, Questions: make([]Question, n), Calibrated: true, Cost: new(decision.USD)}
	costs := make([]*decision.USD, n) // each question's, over every stage that asked it
	pending := make([]int, n)
	for i := range n {
		costs[i], pending[i] = new(decision.USD), i
	}
	asked := make([][]string, n)
	for si, stage := range c.Stages {
		sub := req
		sub.Model, sub.Cascade, sub.Stage = stage, c.Model, si
		sub.Questions = engine.Pick(req.Questions, pending)
		a, err := s.Answer(ctx, sub)
		if err != nil {
			return nil, err
		}
		out.Stages = append(out.Stages, stage)
		out.Cost = AddCost(out.Cost, a.Cost) // every stage asked is billed, kept or not
		out.Usage = out.Usage.Add(a.Usage)
		out.Fits = a.Fits
		last := si == len(c.Stages)-1
		var next []int
		kept := map[string]bool{}
		tempered := false // some answer kept was tempered by a fit
		for j, qi := range pending {
			q := a.Questions[j]
			asked[qi] = append(asked[qi], stage)
			costs[qi] = AddCost(costs[qi], q.Cost)
			if !last && !c.keeps(q, req.Questions[qi].Kind, a.Fits, req.Provider) {
				next = append(next, qi)
				continue
			}
			q.Stage, q.Stages, q.Cost = stage, asked[qi], costs[qi]
			out.Questions[qi] = q
			kept[req.Questions[qi].ID] = true
			tempered = tempered || slices.ContainsFunc(q.Steps, func(st decision.Step) bool { return st.Name == decision.StepTemperature })
		}
		// The answer is calibrated as the answers it keeps are: a stage's
		// answers that went on to the next stage are not the cascade's.
		// A stage's answer is uncalibrated with a warning naming it, or
		// when no fits are loaded at all.
		for _, w := range a.Warnings {
			if kept[w.Question] {
				out.Warnings = append(out.Warnings, w)
				out.Calibrated = out.Calibrated && !w.NoFit
			}
		}
		if len(kept) > 0 && !a.Calibrated && (a.Fits == nil || len(a.Fits.Fits) == 0) {
			out.Calibrated = false
		}
		if tempered && a.FitVersion != "" {
			out.FitVersion = a.FitVersion
		}
		if pending = next; len(pending) == 0 {
			break
		}
	}
	out.Calibrated = out.calibratedSome()
	return out, nil
}

// keeps reports whether c keeps a stage's answer q to a question of kind
// asked under provider: an answer the stage stands behind whose
// calibrated confidence reaches the threshold certified for the stage's
// model, build, kind and option bucket at c's target. Fits are bound to
// builds (LookupServed), so a stage whose build changed has no threshold
// until outcomes under the new build certify one, and an answer of a
// build not probed yet has none either.
func (c Cascade) keeps(q Question, kind decision.Kind, fits *calibration.Fits, provider string) bool {
	if q.Refusal != nil || len(q.Dist) == 0 {
		return false
	}
	ft, ok, _ := fits.LookupServed(provider, q.Model, q.Fingerprint, kind, len(q.Dist))
	if !ok || (ft.Fingerprint != "" && ft.Fingerprint != q.Fingerprint) {
		// Stricter than a temperature: a threshold learnt on a build
		// certifies that build alone, never one not probed yet.
		return c.Keep
	}
	e, ok := ft.EscalationFor(c.TargetError)
	if !ok || !e.Certified {
		return c.Keep
	}
	// The confidence escalations are certified on: a score's is its
	// predicted level's probability, not the largest.
	conf := calibration.Prediction{Kind: kind, Dist: q.Dist, Options: len(q.Dist)}.Confidence()
	return conf >= e.Threshold-1e-9 && !math.IsNaN(conf)
}

// Escalated reports whether the question was asked of more than one
// stage of a cascade.
func (q Question) Escalated() bool { return len(q.Stages) > 1 }

// cascadeModels lists the cascades whose stages are all served, after the
// fleet's catalog; no node is asked.
func (s *Service) cascadeModels() []Model {
	var out []Model
	for _, c := range s.opt.Cascades {
		lim, err := cascadeLimits(c, s.opt.Router.Limits)
		if err != nil {
			continue
		}
		out = append(out, Model{Model: fleet.Model{ID: c.Model, Via: strings.Join(c.Stages, ",")}, Limits: &lim, Stages: c.Stages})
	}
	return out
}
