package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"system1/internal/answer"
	"system1/internal/atomicfile"
	"system1/internal/bench"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/metrics"
	"system1/internal/outcomes"
	"system1/internal/tracing"
)

// DefaultMinCases is the fewest cases a bucket needs to be fitted on.
const DefaultMinCases = 30

func cmdCalibrate(ctx context.Context, args []string, e env) error {
	fs := flags("calibrate", e, fmt.Sprintf(`usage: system1 calibrate --from REPORT.json --out FITS.json [--holdout 0.2] [--min-cases %d] [--model ID] [--provider NAME]
       system1 calibrate --from-log [--config FILE] [--window 168h] [flags] --out FITS.json
       system1 calibrate --report [--config FILE] [--window 168h] [--target-error 0.02]
       system1 calibrate --endpoint URL --model ID [--key-env VAR] [flags] --out FITS.json CASEFILE...
       system1 calibrate --provider NAME [--config FILE] [flags] --out FITS.json CASEFILE...

Fits one temperature per (provider or model, question kind, option-count
bucket) by minimising the negative log-likelihood of the recorded
distributions, scores it on held-out cases, and writes the fits file the
gateway and /v1/systemone (calibration: apply) load. From a saved run
(--from) no model is asked; --model and --provider then name the model and
provider the fits are for, instead of those the run recorded. Otherwise the
cases are asked first, as system1 bench asks them. Each fit carries the
gate its calibrated held-out cases suggest at --target-error (the fitted
cases where none are held out), which decide grades by.

`, DefaultMinCases))
	t := targetFlags(fs)
	from := fs.String("from", "", "fit from this bench report or predictions file, without asking any model")
	out := fs.String("out", "", "write the fits file here (required)")
	holdout := fs.Float64("holdout", 0.2, "share of each bucket's cases kept apart to score the fit on")
	minCases := fs.Int("min-cases", DefaultMinCases, "fewest cases a bucket needs to fit on, after the holdout")
	seed := fs.Uint64("seed", 1, "seed of the holdout split")
	benchReport := fs.String("bench-report", "", "when asking the cases: also write the bench report here")
	// --report alone is the decision log's report; --report=FILE is
	// --bench-report FILE; --report=false (any boolean value) is read as
	// a boolean flag's.
	var reportLog bool
	var reportFile string
	fs.BoolFunc("report", "print the calibration report of the decision log's answers with outcomes (as GET /v1/calibration); --report=false is no report; --report=FILE is --bench-report FILE", func(v string) error {
		if b, err := strconv.ParseBool(v); err == nil {
			reportLog, reportFile = b, ""
		} else {
			reportFile = v
		}
		return nil
	})
	fromLog := fs.Bool("from-log", false, "fit from the decision log's answers with outcomes (no model is asked), with the buckets, --min-cases and --holdout of --from")
	window := fs.Duration("window", 7*24*time.Hour, "with --from-log or --report: how far back the decision log is read")
	targetError := fs.Float64("target-error", 0, "the target error of the suggested gates: those written with each fit (default 0.02), and with --report those of the report (default the configuration's, else 0.02)")
	stateDir := fs.String("state-dir", "", "with --from-log or --report: folder of the decision log "+stateDirDefault)
	if err := parse(fs, args); err != nil {
		return err
	}
	if a := flagAmong(fs, fs.Args()); a != "" {
		return e.usageError("calibrate", a+": flags go before the case files: system1 calibrate [flags] --out FITS.json CASEFILE...")
	}
	*benchReport = cmp.Or(reportFile, *benchReport)
	// Checked before --report too, which reads both.
	switch {
	case !(*targetError >= 0 && *targetError < 1):
		return e.usageError("calibrate", "--target-error must be in [0, 1)")
	case *window <= 0:
		return e.usageError("calibrate", "--window must be positive")
	}
	if reportLog {
		if *fromLog || *from != "" || len(fs.Args()) > 0 || t.endpoint != "" {
			return e.usageError("calibrate", "--report reads the decision log: no --from, --from-log, --endpoint or case files with it")
		}
		return calibrationReport(ctx, e, t.config, *stateDir, *window, *targetError)
	}
	switch {
	case *out == "":
		return e.usageError("calibrate", "--out is required")
	case !(*holdout >= 0 && *holdout < 1):
		return e.usageError("calibrate", "--holdout must be in [0, 1)")
	case *minCases < 1:
		return e.usageError("calibrate", "--min-cases must be at least 1")
	}

	var records []bench.Record
	if *fromLog {
		if *from != "" || len(fs.Args()) > 0 || t.endpoint != "" {
			return e.usageError("calibrate", "--from-log fits the decision log's answers: no --from, case files or --endpoint with it")
		}
		var err error
		if records, err = logRecords(ctx, e, t.config, *stateDir, *window); err != nil {
			return err
		}
	} else if *from != "" {
		if len(fs.Args()) > 0 || t.endpoint != "" || t.config != "" {
			return e.usageError("calibrate", "--from fits a saved run: no case files, --endpoint or --config with it")
		}
		data, err := os.ReadFile(*from)
		if err != nil {
			return err
		}
		if records, _, err = bench.Load(data); err != nil {
			return fmt.Errorf("%s: %w", *from, err)
		}
	} else {
		if err := t.check(fs.Args()); err != nil {
			return e.usageError("calibrate", err.Error())
		}
		rep, err := runBench(ctx, e, t, fs.Args())
		if err != nil {
			return err
		}
		rep.Assemble(nil)
		if err := writeBenchOutputs(e, rep, *benchReport, "", ""); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted (%w): nothing fitted", err)
		}
		fmt.Fprintln(e.stdout)
		records = rep.Cases
	}

	opt := bench.FitOptions{Holdout: *holdout, MinCases: *minCases, Seed: *seed, Provider: t.provider, Date: time.Now().UTC().Format("2006-01-02"), TargetError: *targetError}
	if *from != "" || *fromLog {
		opt.Model = t.model // the run's requests named the model; from a file, --model renames it
	}
	res := bench.FitRecords(records, opt)
	for _, b := range res.Buckets {
		if b.Fit == nil {
			fmt.Fprintf(e.stderr, "system1 calibrate: not fitting %s, bucket %s, of %s: %s\n", b.Kind, b.Bucket, source(b), b.Refused)
		}
	}
	if err := res.WriteMarkdown(e.stdout); err != nil {
		return err
	}
	if len(res.Fits.Fits) == 0 {
		return errors.New("no bucket could be fitted; no fits file written")
	}
	res.Fits.Created = time.Now().UTC().Format(time.RFC3339)
	res.Fits.Revise(time.Now())
	data, err := res.Fits.Encode()
	if err != nil {
		return err
	}
	if err := writeData(*out, data); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nwrote %d fit(s) to %s\n", len(res.Fits.Fits), *out)
	return nil
}

// source names a bucket's provider and model for a message.
func source(b bench.BucketFit) string {
	switch {
	case b.Provider != "" && b.Model != "":
		return fmt.Sprintf("provider %s, model %s", b.Provider, b.Model)
	case b.Provider != "":
		return "provider " + b.Provider
	case b.Model != "":
		return "model " + b.Model
	}
	return "an unnamed model"
}

// learnt is cfg as serve reads it (Config.Learn: with no calibration
// mode written, the fits its default loop keeps in stateDir applied)
// where those fits exist, for the commands that apply or report under
// what serve learnt without running its loop; else cfg itself.
func learnt(cfg *config.Config, stateDir string, getenv func(string) string) *config.Config {
	l := *cfg
	l.Learn(stateDir, getenv)
	if !l.Calibration.Apply() || l.Gateway.Fits == "" {
		return cfg
	}
	if _, err := os.Stat(l.Resolve(l.Gateway.Fits)); err != nil {
		return cfg
	}
	return &l
}

// startFits writes an empty fits file at path, where none is, for the
// refits to fill: its folder (the state folder the default loop keeps
// them in) may be new. A file already there is left as it is.
func startFits(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	empty := &calibration.Fits{Version: calibration.FitsVersion, Created: time.Now().UTC().Format(time.RFC3339), Fits: []calibration.Fit{}}
	data, err := empty.Encode()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// Whole or not at all: a write cut short (a full disk, a crash)
	// left a file that stopped every later start.
	return atomicfile.Write(path, ".fits-*.json", data, 0o644)
}

// loopFits is the fits file the decide chain of mcp and system1 decide
// applies: learnt's, and with serve's default loop on and no fits file
// named, the one that loop keeps in stateDir, started empty where serve
// has not written it yet (as serve starts it), so that the loop's first
// refit applies without a restart, as its later ones do.
func loopFits(cfg *config.Config, stateDir string, getenv func(string) string) string {
	if l := *cfg; cfg.Gateway.Fits == "" {
		l.Learn(stateDir, getenv)
		if l.Gateway.Fits != "" && l.Calibration.Apply() && l.Calibration.RefitEvery > 0 {
			// One that cannot be written leaves none to apply, as before it.
			_ = startFits(l.Resolve(l.Gateway.Fits))
		}
	}
	return learnt(cfg, stateDir, getenv).Gateway.Fits
}

// errRefitsWithoutTheLog refuses refits asked for with the log they
// learn from turned off.
var errRefitsWithoutTheLog = errors.New("calibration.refit_every: the decision log is off (decision_log.off), and the refits learn from its outcomes: turn the log on, or leave refit_every out")

// servingFits opens the fits /v1/systemone applies: none unless the
// configuration says calibration: apply, and then gateway.fits, resolved
// beside the configuration file, which must be valid. With
// calibration.refit_every set, a missing file starts empty: the refits
// fill it.
func servingFits(cfg *config.Config, log *slog.Logger) (*outcomes.FitsFile, error) {
	if !cfg.Calibration.Apply() {
		switch {
		case cfg.Calibration.RefitEvery > 0 && cfg.DecisionLog.Off:
			return nil, errRefitsWithoutTheLog
		case cfg.Calibration.RefitEvery > 0:
			return nil, errors.New("calibration.refit_every needs mode: apply (the refits are applied to /v1/systemone and decide)")
		}
		return nil, nil
	}
	if cfg.Gateway.Fits == "" {
		return nil, errors.New("calibration: apply needs a fits file: set gateway.fits (system1 calibrate writes one)")
	}
	path := cfg.Resolve(cfg.Gateway.Fits)
	if cfg.Calibration.RefitEvery > 0 {
		if err := startFits(path); err != nil {
			return nil, fmt.Errorf("calibration: starting an empty fits file for the refits: %w", err)
		}
	}
	fits, err := outcomes.OpenFitsFile(path, log)
	if err != nil {
		return nil, fmt.Errorf("calibration: apply: %w", err)
	}
	log.Info("calibration on for /v1/systemone", "fits", path, "revision", fits.Current().Revision, "count", len(fits.Current().Fits))
	return fits, nil
}

// eceWindow is the window of the rolling ECE gauge.
const eceWindow = 24 * time.Hour

// watchECE sets the rolling ECE and drift gauges from the tracker, which
// reads only the outcomes recorded since it was last asked. Each
// signature that alarms is logged, and suspect told its model.
func watchECE(ctx context.Context, m *metrics.Metrics, tracker *outcomes.Tracker, fits *outcomes.FitsFile, drift outcomes.DriftOptions, suspect func(model string), log *slog.Logger) {
	now := time.Now()
	rep, err := tracker.Report(ctx, fits.Current(), outcomes.ReportOptions{Since: now.Add(-eceWindow), Until: now, Drift: drift})
	if err != nil && ctx.Err() == nil {
		log.Warn("rolling ECE: reading the decision log failed", "request_id", "-", "err", err)
		return
	}
	points := make([]metrics.ECE, 0, len(rep.Buckets))
	for _, b := range rep.Buckets {
		points = append(points, metrics.ECE{Model: b.Model, Kind: string(b.Kind), Bucket: b.Bucket, ECE: b.ECECalibrated})
	}
	m.SetECE(points)
	drifts := make([]metrics.Drift, 0, len(rep.Drift))
	for _, d := range rep.Drift {
		drifts = append(drifts, metrics.Drift{Model: d.Model, Signature: d.Signature, PSI: d.PSI, Alarm: d.Alarm})
		if d.Alarm {
			log.Warn("the answers drifted", "request_id", "-", "model", d.Model, "signature", d.Signature, "reason", d.Reason)
			suspect(d.Model)
		}
	}
	m.SetDrift(drifts)
}

// adopted counts the refit decisions that adopted a calibrator or a
// confidence map.
func adopted(ds []outcomes.RefitDecision) int {
	n := 0
	for _, d := range ds {
		if d.Adopted {
			n++
		}
	}
	return n
}

// driftOptions are the drift report's options the configuration sets.
func driftOptions(d config.Drift) outcomes.DriftOptions {
	return outcomes.DriftOptions{Window: time.Duration(d.Window), Reference: time.Duration(d.Reference), Threshold: d.Threshold}
}

// loopOptions is the learning loop serve runs, as GET /v1/calibration
// reports it: refits only where there are fits to refit.
func loopOptions(c config.Calibration, fits *outcomes.FitsFile) *outcomes.LoopOptions {
	o := &outcomes.LoopOptions{MinOutcomes: c.MinOutcomes}
	if fits != nil {
		o.RefitEvery = time.Duration(c.RefitEvery)
	}
	return o
}

// refitLoop refits from the decision log every calibration.refit_every
// until ctx ends: each bucket with min_outcomes outcomes new since its
// last refit (outcomes.FitsFile.Refit), writing a new version of the
// fits file when a fit changed; both faces pick it up from the file.
func refitLoop(ctx context.Context, fits *outcomes.FitsFile, tracker *outcomes.Tracker, c config.Calibration, cascades []answer.Cascade, tr *tracing.Tracer, log *slog.Logger) {
	var targets []float64
	for _, cc := range cascades {
		targets = append(targets, cc.TargetError)
	}
	t := time.NewTicker(time.Duration(c.RefitEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, span := tr.StartRefit(ctx)
		ds, rev, err := fits.Refit(rctx, tracker, outcomes.RefitOptions{MinOutcomes: c.MinOutcomes, Folds: c.Folds, Seed: 1, TargetError: c.TargetError, EscalationTargets: targets})
		tracing.EndRefit(span, len(ds), adopted(ds), rev, err)
		if err != nil {
			log.Error("refit from the decision log failed", "request_id", "-", "err", err)
			continue
		}
		for _, d := range ds {
			// The build the bucket's outcomes came from: each build is
			// refitted apart, and a line that did not say which could not
			// be told from another build's.
			attrs := []any{"request_id", "-", "model", d.Model, "fingerprint", cmp.Or(d.Fingerprint, "unknown"),
				"kind", d.Kind, "bucket", d.Bucket, "outcomes", d.Outcomes, "new", d.New, "current", d.Current,
				"calibrator", d.Calibrator, "sets", d.Sets, "written", d.Written, "why", d.Reason, "evidence", d.Evidence()}
			switch {
			case d.Adopted:
				log.Info("refit adopted", append(attrs, "revision", rev)...)
			case d.Written:
				log.Info("refit kept the calibrator and wrote new prediction sets", append(attrs, "revision", rev)...)
			default:
				log.Info("refit refused", attrs...)
			}
		}
	}
}
