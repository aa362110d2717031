package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"system1/internal/bench"
	"system1/internal/calibration"
	"system1/internal/config"
)

// DefaultMinCases is the fewest cases a bucket needs to be fitted on.
const DefaultMinCases = 30

func cmdCalibrate(ctx context.Context, args []string, e env) error {
	fs := flags("calibrate", e)
	t := targetFlags(fs)
	from := fs.String("from", "", "fit from this bench report or predictions file, without asking any model")
	out := fs.String("out", "", "write the fits file here (required)")
	holdout := fs.Float64("holdout", 0.2, "share of each bucket's cases kept apart to score the fit on")
	minCases := fs.Int("min-cases", DefaultMinCases, "fewest cases a bucket needs to fit on, after the holdout")
	seed := fs.Uint64("seed", 1, "seed of the holdout split")
	report := fs.String("report", "", "when asking the cases: also write the bench report here")
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, `usage: system1 calibrate --from REPORT.json --out FITS.json [--holdout 0.2] [--min-cases %d] [--model ID] [--provider NAME]
       system1 calibrate --endpoint URL --model ID [--key-env VAR] [flags] --out FITS.json CASEFILE...
       system1 calibrate --provider NAME [--config FILE] [flags] --out FITS.json CASEFILE...

Fits one temperature per (provider or model, question kind, option-count
bucket) by minimising the negative log-likelihood of the recorded
distributions, scores it on held-out cases, and writes the fits file the
gateway and /v1/systemone (calibration: apply) load. From a saved run
(--from) no model is asked; --model and --provider then name the model and
provider the fits are for, instead of those the run recorded. Otherwise the
cases are asked first, as system1 bench asks them.

`, DefaultMinCases)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	usage := func(msg string) error {
		fmt.Fprintln(e.stderr, "system1 calibrate:", msg)
		return errUsage
	}
	switch {
	case *out == "":
		return usage("--out is required")
	case !(*holdout >= 0 && *holdout < 1):
		return usage("--holdout must be in [0, 1)")
	case *minCases < 1:
		return usage("--min-cases must be at least 1")
	}

	var records []bench.Record
	if *from != "" {
		if len(fs.Args()) > 0 || t.endpoint != "" || t.config != "" {
			return usage("--from fits a saved run: no case files, --endpoint or --config with it")
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
			return usage(err.Error())
		}
		rep, err := runBench(ctx, e, t, fs.Args())
		if err != nil {
			return err
		}
		rep.Assemble(nil)
		if err := writeBenchOutputs(e, rep, *report, "", ""); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted (%w): nothing fitted", err)
		}
		fmt.Fprintln(e.stdout)
		records = rep.Cases
	}

	opt := bench.FitOptions{Holdout: *holdout, MinCases: *minCases, Seed: *seed, Provider: t.provider, Date: time.Now().UTC().Format("2006-01-02")}
	if *from != "" {
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
	data, err := res.Fits.Encode()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
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

// servingFits loads the fits /v1/systemone applies: none unless the
// configuration says calibration: apply, and then gateway.fits, resolved
// beside the configuration file, which must be there and valid.
func servingFits(cfg *config.Config, log *slog.Logger) (*calibration.Fits, error) {
	if cfg.Calibration != "apply" {
		return nil, nil
	}
	if cfg.Gateway.Fits == "" {
		return nil, errors.New("calibration: apply needs a fits file: set gateway.fits (system1 calibrate writes one)")
	}
	path := cfg.Resolve(cfg.Gateway.Fits)
	fits, err := calibration.LoadFits(path)
	if err != nil {
		return nil, fmt.Errorf("calibration: apply: %w", err)
	}
	log.Info("calibration on for /v1/systemone", "fits", path, "count", len(fits.Fits))
	return fits, nil
}
