package config

import (
	"strings"
	"testing"
	"time"
)

// calibration: takes the old scalar and the mapping; the mapping's keys
// are checked by path like every other.
func TestCalibrationBothForms(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want Calibration
		err  string
	}{
		{"calibration: apply\n", Calibration{Mode: "apply"}, ""},
		{"calibration: off\n", Calibration{Mode: "off"}, ""},
		{"calibration:\n  mode: apply\n  refit_every: 10m\n  min_outcomes: 40\n  holdout: 0.25\n  target_error: 0.05\n",
			Calibration{Mode: "apply", RefitEvery: Duration(10 * time.Minute), MinOutcomes: 40, Holdout: 0.25, TargetError: 0.05}, ""},
		{"calibration:\n  refit_evry: 10m\n", Calibration{}, "calibration.refit_evry"},
		{"calibration:\n  refit_every: soon\n", Calibration{}, "calibration.refit_every"},
		{"calibration: sometimes\n", Calibration{}, `"sometimes" is not off or apply`},
		{"calibration:\n  target_error: 1.5\n", Calibration{}, "calibration.target_error"},
	} {
		cfg, err := Parse([]byte(c.yaml))
		if err == nil {
			if errs := cfg.Check(); len(errs) > 0 {
				err = errs[0]
			}
		}
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v; want one naming %s", c.yaml, err, c.err)
			}
			continue
		}
		if err != nil || cfg.Calibration != c.want {
			t.Errorf("%q: %+v, %v; want %+v", c.yaml, cfg.Calibration, err, c.want)
		}
	}
}
