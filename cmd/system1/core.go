package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/fleet"
	"system1/internal/metrics"
	"system1/internal/outcomes"
)

// answerPath is the answer path o describes, over o.Router, with cfg's
// cascades, applying the fits of file (none when nil) and recording in
// dlog (nothing when nil). o.Local, which keeps the nodes' addresses in
// failures, is for the faces whose caller runs system1 itself (mcp over
// stdio, the command line), never for serve's. Its WithCache adds the
// process's decision cache.
func answerPath(cfg *config.Config, file *outcomes.FitsFile, dlog *decisionlog.Log, o answer.Options) *answer.Service {
	o.Cascades = cascades(cfg)
	if file != nil {
		o.Fits = file.Current
	}
	if dlog != nil {
		o.Recorder = dlog
		// A swap's uncertain window goes where the answers do, for every
		// process's refits to leave out.
		o.Router.RecordUncertainTo(dlog)
	}
	return answer.New(o)
}

// cascades are the cascades cfg configures, for the answer path.
func cascades(cfg *config.Config) []answer.Cascade {
	var out []answer.Cascade
	for _, c := range cfg.Cascades {
		out = append(out, answer.Cascade{Model: c.Model, Stages: c.Stages, TargetError: c.TargetError, Keep: c.Uncertified == config.UncertifiedKeep})
	}
	return out
}

// newShadow starts the shadow rollouts cfg configures, nil for none; a
// rollout needs the decision log, where the candidate's answers go.
func newShadow(cfg *config.Config, dlog *decisionlog.Log, m *metrics.Metrics, log *slog.Logger) *answer.Shadow {
	if len(cfg.Shadow) == 0 {
		return nil
	}
	if dlog == nil {
		log.Warn("shadow is configured but the decision log is off: no shadow rollouts, as their answers would not be kept")
		return nil
	}
	rules := make([]answer.ShadowRule, len(cfg.Shadow))
	for i, r := range cfg.Shadow {
		rules[i] = answer.ShadowRule{Model: r.Model, Candidate: r.Candidate, Share: r.Share}
		log.Info("shadow rollout", "model", r.Model, "candidate", r.Candidate, "share", r.Share)
	}
	s := answer.NewShadow(answer.ShadowOptions{Rules: rules, Log: log})
	m.WatchShadow(func() metrics.ShadowCounts {
		st := s.Stats()
		return metrics.ShadowCounts{Sampled: st.Sampled, Dropped: st.Dropped, Failed: st.Failed, Asked: st.Asked, Queued: st.Queued}
	})
	return s
}

// decideFits opens the fits decide applies: gateway.fits whenever it is
// set, whatever calibration.mode says (/v1/systemone applies them only
// with mode apply, see servingFits); serving, when serve opened them
// already, so that both faces reload one file together.
func decideFits(cfg *config.Config, serving *outcomes.FitsFile, log *slog.Logger) (*outcomes.FitsFile, error) {
	if serving != nil || cfg.Gateway.Fits == "" {
		return serving, nil
	}
	f, err := outcomes.OpenFitsFile(cfg.Resolve(cfg.Gateway.Fits), log)
	if err != nil {
		return nil, fmt.Errorf("gateway.fits: %w", err)
	}
	return f, nil
}

// chainPath builds what the decide chain of a command-line face (mcp,
// decide, bench) asks: the answer path over the configuration's nodes,
// with the fits decide applies and dlog. What cannot be built is
// returned as configuration errors for the gateway to report; the path
// is nil when no router could be built, or no chain is configured (which
// the gateway reports).
func chainPath(cfg *config.Config, getenv func(string) string, dlog *decisionlog.Log, log *slog.Logger) (*answer.Service, []error) {
	if len(cfg.Gateway.Chain) == 0 {
		return nil, nil
	}
	router, err := localRouter(cfg, getenv, nil)
	if err != nil {
		return nil, []error{fmt.Errorf("nodes: %w", err)}
	}
	var errs []error
	fits, err := decideFits(cfg, nil, log)
	if err != nil {
		errs = append(errs, err)
	}
	return answerPath(cfg, fits, dlog, answer.Options{Router: router, Local: true}).WithCache(decisionCache(cfg)), errs
}

// measuredPath is the answer path bench and check measure a model
// through, over the nodes of the configuration cfgFlag names: no decision
// log, no cache and no fits, so that every case is asked and its reading
// is the model's. log is localRouter's.
func measuredPath(ctx context.Context, cfgFlag string, e env, log *slog.Logger) (*config.Config, *answer.Service, error) {
	cfg, err := loadConfig(ctx, cfgFlag, e.getenv, (*config.Config).Check)
	if err != nil {
		return nil, nil, err
	}
	router, err := localRouter(cfg, e.getenv, log)
	if err != nil {
		return nil, nil, fmt.Errorf("configuration %s: nodes: %w", cfg.Path, err)
	}
	return cfg, answerPath(cfg, nil, nil, answer.Options{Router: router, Local: true}), nil
}

// localRouter is the router of a face that runs no background probe (mcp,
// the command line): it fingerprints the builds as requests use them, so
// that their answers are bound to the build that served them as serve's
// are, and no node is contacted before a request. log (nil: the default)
// takes the line a change of build writes.
func localRouter(cfg *config.Config, getenv func(string) string, log *slog.Logger) (*fleet.Router, error) {
	return fleet.FromConfig(cfg, fleet.Options{Getenv: getenv, Fingerprint: fleet.FingerprintOptions{OnUse: true, Log: log}})
}

// decisionCache is the decision cache cfg.Cache configures, nil when it
// is off. One serves every face of a process.
func decisionCache(cfg *config.Config) *answer.Cache {
	return answer.NewCache(cfg.Cache.Entries, time.Duration(cfg.Cache.TTL))
}
