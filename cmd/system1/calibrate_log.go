package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"system1/internal/bench"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/outcomes"
)

// openLogFor opens the decision log of the configuration cfgFlag names
// (configPath), held to its decision_log section alone.
func openLogFor(ctx context.Context, e env, cfgFlag, stateDir string) (*config.Config, *decisionlog.Log, error) {
	cfg, err := loadConfig(ctx, cfgFlag, e.getenv, checkLog)
	if err != nil {
		return nil, nil, err
	}
	// A command at a terminal logs warnings and errors only: the line
	// saying the log is off is not shown, so the error says it.
	if cfg.DecisionLog.Off {
		return nil, nil, fmt.Errorf("the decision log is off (decision_log.off in %s): there is nothing to read", cfg.Path)
	}
	l := openDecisionLog(ctx, cfg.DecisionLog, stateDir, e, logger(e), nil)
	if l == nil && ctx.Err() != nil {
		return nil, nil, context.Cause(ctx) // a signal while it opened
	}
	if l == nil {
		return nil, nil, errors.New("the decision log could not be opened (see the log above)")
	}
	return cfg, l, nil
}

// logRecords reads the decision log's answers with outcomes of the last
// window as bench records: each over its distribution before the
// temperature step, so that a fit from the log is the one --from makes.
func logRecords(ctx context.Context, e env, cfgFlag, stateDir string, window time.Duration) ([]bench.Record, error) {
	_, l, err := openLogFor(ctx, e, cfgFlag, stateDir)
	if err != nil {
		return nil, err
	}
	defer closeDecisionLog(l, logger(e))
	now := time.Now()
	groups, err := l.Labelled(ctx, now.Add(-window), now.Add(time.Second), "")
	if err != nil {
		return nil, err
	}
	var out []bench.Record
	for _, g := range groups {
		for _, en := range g.Entries {
			p, ok := en.Prediction(en.Uncalibrated())
			if !ok {
				continue
			}
			out = append(out, bench.Record{ID: en.RequestID + "/" + en.QuestionID, Set: "decision-log", Model: en.Model,
				Questions: []bench.Question{{ID: en.QuestionID, Kind: p.Kind, Options: p.Options, Expected: p.Expected, Dist: p.Dist}}})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the decision log has no answers with outcomes in the last %s: report outcomes with system1 feedback or POST /v1/feedback", window)
	}
	return out, nil
}

// calibrationReport prints the decision log's calibration report as JSON,
// as GET /v1/calibration answers it, with the fits /v1/systemone applies.
func calibrationReport(ctx context.Context, e env, cfgFlag, stateDir string, window time.Duration, target float64) error {
	cfg, l, err := openLogFor(ctx, e, cfgFlag, stateDir)
	if err != nil {
		return err
	}
	defer closeDecisionLog(l, logger(e))
	// The fits /v1/systemone applies, which serve reports under: those
	// of calibration: apply, or those serve's default loop keeps in the
	// state folder (which decide and mcp apply too), once there are any;
	// none with calibration off, whatever gateway.fits names for decide.
	served := learnt(cfg, stateDir, e.getenv)
	var fits *calibration.Fits
	if served.Calibration.Apply() && served.Gateway.Fits != "" {
		if fits, err = outcomes.LoadFits(served.Resolve(served.Gateway.Fits)); err != nil {
			return fmt.Errorf("gateway.fits: %w", err)
		}
	}
	// Without --target-error, the default GET /v1/calibration takes: the
	// configuration's, else outcomes.DefaultTargetError.
	target = cmp.Or(target, cfg.Calibration.TargetError)
	now := time.Now()
	since := now.Add(-window)
	rep, err := outcomes.ReportCalibrationWith(ctx, l, fits, outcomes.ReportOptions{Since: since, Until: now, TargetError: target, Drift: driftOptions(cfg.Drift)})
	if err == nil {
		// As GET /v1/calibration reports them, a stage's alias resolved.
		resolve := func(m string) string { return cmp.Or(cfg.Aliases[m], m) }
		rep.Cascades, err = outcomes.ReportCascades(ctx, l, fits, cascades(cfg), resolve, since, now)
	}
	if err != nil {
		return err
	}
	return printJSON(e, rep)
}
