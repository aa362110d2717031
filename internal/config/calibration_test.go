package config

import (
	"path/filepath"
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
			Calibration{Mode: "apply", RefitEvery: Duration(10 * time.Minute), MinOutcomes: 40, Holdout: 0.25, TargetError: 0.05, refitSet: true}, ""},
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

// With the decision log on, a configuration that says nothing of
// calibration learns from outcomes: serve applies fits it refits every
// DefaultRefitEvery, kept in gateway.fits or the state folder. What is
// written is kept: a mode, refit_every (0s turns the loop off), and the
// log off leaves calibration off.
func TestLearnByDefault(t *testing.T) {
	state := t.TempDir()
	inState := state + "/" + DefaultFitsFile
	for _, c := range []struct {
		name, yaml string
		mode, fits string
		every      time.Duration
	}{
		{"nothing said", "", "apply", inState, DefaultRefitEvery},
		{"fits named", "gateway: {fits: /etc/f.json}\n", "apply", "/etc/f.json", DefaultRefitEvery},
		{"refits hourly", "calibration: {refit_every: 1h}\n", "apply", inState, time.Hour},
		{"refits never", "calibration: {refit_every: 0s}\n", "", "", 0},
		{"mode off", "calibration: off\n", "off", "", 0},
		{"mode apply as written", "calibration: apply\ngateway: {fits: /etc/f.json}\n", "apply", "/etc/f.json", 0},
		{"log off", "decision_log: {off: true}\n", "", "", 0},
	} {
		cfg, err := Parse([]byte(c.yaml))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cfg.Learn(state, func(string) string { return "" })
		if cfg.Calibration.Mode != c.mode || cfg.Gateway.Fits != c.fits || time.Duration(cfg.Calibration.RefitEvery) != c.every {
			t.Errorf("%s: mode %q, fits %q, refit_every %s; want %q, %q, %s", c.name, cfg.Calibration.Mode, cfg.Gateway.Fits,
				time.Duration(cfg.Calibration.RefitEvery), c.mode, c.fits, c.every)
		}
	}
}

// The default loop keeps its fits in the state folder, where the
// decision log is, also when the folder is given relative to the working
// directory (--state-dir state) and the configuration file lies
// elsewhere: gateway.fits was left relative and resolved beside the
// configuration file (conf/state/fits.json, beside a log in
// state/decisions.db).
func TestLearnKeepsTheFitsInARelativeStateFolder(t *testing.T) {
	cfg, err := Parse([]byte(""))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Path = filepath.Join("conf", "system1.yaml")
	getenv := func(string) string { return "" }
	cfg.Learn("state", getenv)
	want, err := filepath.Abs(filepath.Join("state", DefaultFitsFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Resolve(cfg.Gateway.Fits); got != want {
		t.Errorf("the fits are kept in %s; want %s, in the state folder beside the decision log (%s)", got, want, cfg.DecisionLog.File("state", getenv))
	}
}
