package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Calibration configures calibration: written as the scalar off or apply
// (the old form, which stays valid), or as a mapping
//
//	calibration:
//	  mode: apply           # off | apply
//	  refit_every: 10m      # serve refits from the decision log this often (0: never)
//	  min_outcomes: 30      # outcomes a bucket needs, new since its last fit, to be refitted
//	  holdout: 0.2          # share of a bucket's outcomes a refit is scored on
//	  target_error: 0.02    # the error rate GET /v1/calibration's gates keep under
type Calibration struct {
	// Mode is "off" (the default) or "apply".
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
	return n.Decode((*plain)(c))
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
