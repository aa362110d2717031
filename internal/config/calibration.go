package config

import (
	"fmt"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"system1/internal/pause"
)

// DefaultRefitEvery is how often serve refits from the decision log when
// the learning loop is on by default (see Config.Learn).
const DefaultRefitEvery = 10 * time.Minute

// DefaultFitsFile is the fits file the default learning loop writes, in
// the state directory, when gateway.fits is left out.
const DefaultFitsFile = "fits.json"

// Calibration configures calibration: written as the scalar off or apply
// (the old form, which stays valid), or as a mapping
//
//	calibration:
//	  mode: apply           # off | apply
//	  refit_every: 10m      # serve refits from the decision log this often (0s: never)
//	  min_outcomes: 30      # outcomes a bucket needs, new since its last fit, to be refitted
//	  holdout: 0.2          # share of a bucket's outcomes a refit is scored on
//	  target_error: 0.02    # the error rate GET /v1/calibration's gates keep under
type Calibration struct {
	// Mode is "off" or "apply"; left out, it is apply with the learning
	// loop on where the decision log is on (Config.Learn), else off.
	Mode string `yaml:"mode"`
	// RefitEvery is how often serve looks for buckets to refit; 0 never.
	RefitEvery Duration `yaml:"refit_every"`
	// MinOutcomes is the outcomes a bucket needs new since its last
	// refit to be refitted (0: 30).
	MinOutcomes int `yaml:"min_outcomes"`
	// Folds is the number of cross-validation folds a refit chooses its
	// calibrator by (0: 5; at least 2).
	Folds int `yaml:"folds"`
	// Holdout was the share of outcomes a refit held out to score itself
	// on; refits cross-validate over every outcome now, and it is read
	// and ignored, so configurations that set it still load.
	Holdout float64 `yaml:"holdout"`
	// TargetError is the default target of suggested gates (0: 0.02).
	TargetError float64 `yaml:"target_error"`
	// refitSet is whether refit_every was written: left out, the
	// default loop refits every DefaultRefitEvery; written 0s, never.
	refitSet bool
}

// Learn fills in what the configuration leaves out of the learning loop,
// for serve with the state directory stateDir: with the decision log on
// and calibration's mode left out, outcomes are learnt from by default:
// serve refits every DefaultRefitEvery (unless refit_every says
// otherwise; 0s turns the loop off) and applies the fits, which it keeps
// in gateway.fits or, when that is left out too, DefaultFitsFile in the
// state directory. No outcomes, no change: a bucket is refitted only
// once min_outcomes new outcomes came for it. A mode written (off or
// apply) is kept as written.
func (c *Config) Learn(stateDir string, getenv func(string) string) {
	cal := &c.Calibration
	if c.DecisionLog.Off || cal.Mode != "" || (cal.refitSet && cal.RefitEvery == 0) {
		return
	}
	cal.Mode = "apply"
	if !cal.refitSet {
		cal.RefitEvery = Duration(DefaultRefitEvery)
	}
	if c.Gateway.Fits == "" {
		// Absolute, as the state folder is the working directory's where
		// it is relative (the decision log's is): Resolve would take a
		// relative path beside the configuration file.
		fits := filepath.Join(pause.Dir(stateDir, getenv), DefaultFitsFile)
		if abs, err := filepath.Abs(fits); err == nil {
			fits = abs
		}
		c.Gateway.Fits = fits
	}
}

// Apply reports whether fits are applied on /v1/systemone.
func (c Calibration) Apply() bool { return c.Mode == "apply" }

// UnmarshalYAML reads the scalar form or the mapping.
func (c *Calibration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() != "!!null" {
			c.Mode = n.Value
		}
		return nil
	}
	type plain Calibration
	if err := n.Decode((*plain)(c)); err != nil {
		return err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "refit_every" {
			c.refitSet = true
		}
	}
	return nil
}

// MarshalYAML writes the scalar form when only the mode is set.
func (c Calibration) MarshalYAML() (any, error) {
	if c == (Calibration{Mode: c.Mode}) {
		return c.Mode, nil
	}
	type plain Calibration
	return plain(c), nil
}

func (c Calibration) check() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Mode != "" && c.Mode != "off" && c.Mode != "apply" {
		bad("calibration: %q is not off or apply", c.Mode)
	}
	if c.RefitEvery < 0 {
		bad("calibration.refit_every: negative")
	}
	if c.MinOutcomes < 0 {
		bad("calibration.min_outcomes: %d is negative", c.MinOutcomes)
	}
	if c.Folds < 0 || c.Folds == 1 || c.Folds > 20 {
		bad("calibration.folds: %d is not 0 (the default, 5) or 2 to 20", c.Folds)
	}
	if !(c.Holdout >= 0 && c.Holdout < 1) {
		bad("calibration.holdout: %v is not in [0, 1)", c.Holdout)
	}
	if !(c.TargetError >= 0 && c.TargetError < 1) {
		bad("calibration.target_error: %v is not in [0, 1)", c.TargetError)
	}
	return errs
}
