package answer

import (
	"context"
	"errors"

	"system1/internal/decision"
	"system1/internal/fleet"
)

// Admit is the answer path's front door, which every face passes before
// it checks a request and asks it: the limits of the nodes serving model
// (through the aliases), the largest option cap among them. A model no
// node is known to serve has the nodes that discover their models list
// them first (fleet.Router.Refresh: at once where a node never listed
// them, and where it did, again after a while), so that a model a node
// serves but has not named yet, or was pulled since, is found. When none
// serves it, lim is the defaults, for a face that checks the rest of the
// request anyway, and err a *Failure of class UnknownModel; an empty
// model is not looked for.
//
// A cascade is admitted when every stage is, with the strictest of their
// limits.
func (s *Service) Admit(ctx context.Context, model string) (lim decision.Limits, err error) {
	if c, ok := s.cascade(model); ok {
		return cascadeLimits(c, func(st string) (decision.Limits, error) { return s.Admit(ctx, st) })
	}
	r := s.opt.Router
	lim, err = r.Limits(model)
	if errors.Is(err, fleet.ErrUnknownModel) && model != "" {
		r.Refresh(ctx)
		lim, err = r.Limits(model)
	}
	if err != nil {
		return decision.DefaultLimits(), s.refused(model, err)
	}
	return lim, nil
}

// Capacity is how many requests of k questions over model the healthy
// nodes serving it run at once with every slot busy
// (fleet.Router.Capacity): what a face that asks many at once (a batch, a
// job's rows) keeps in flight; 0 when no healthy node serves the model.
// A cascade's is its first stage's, which every question reaches.
func (s *Service) Capacity(ctx context.Context, model string, k int) int {
	if c, ok := s.cascade(model); ok {
		model = c.Stages[0]
	}
	return s.opt.Router.Capacity(ctx, model, k)
}

// Model is one model the service answers to, and the limits of a request
// for it; Limits is nil when no node serves it any more.
type Model struct {
	fleet.Model
	Limits *decision.Limits
	// Stages are a cascade's stages, in order; nil for a served model or
	// an alias.
	Stages []string
}

// Models lists every model the nodes serve and every alias whose target
// is served (fleet.Router.Catalog), then every cascade whose stages are
// all served, each with its limits: what GET /v1/models and decide's
// capabilities list. No node is asked.
func (s *Service) Models() []Model {
	r := s.opt.Router
	var out []Model
	for _, m := range r.Catalog() {
		one := Model{Model: m}
		if lim, err := r.Limits(m.ID); err == nil {
			one.Limits = &lim
		}
		out = append(out, one)
	}
	return append(out, s.cascadeModels()...)
}

// States are the nodes' states, in configured order (fleet.Router.States):
// the fleet's one view of them, which health checks show.
func (s *Service) States() []fleet.State { return s.opt.Router.States() }

// Ping has the nodes serving model list their models, as the background
// probes do (fleet.Router.Ping), after Refresh has the nodes that
// discover theirs list them: a health check's look, which sends no user
// data.
// A cascade's are every stage's.
func (s *Service) Ping(ctx context.Context, model string) []fleet.Ping {
	s.opt.Router.Refresh(ctx)
	if c, ok := s.cascade(model); ok {
		var out []fleet.Ping
		for _, st := range c.Stages {
			out = append(out, s.opt.Router.Ping(ctx, st)...)
		}
		return out
	}
	return s.opt.Router.Ping(ctx, model)
}
