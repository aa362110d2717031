package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/outcomes"
)

// calibrate --from-log fits the decision log's answers with outcomes
// like --from fits a saved run (buckets, --min-cases, the holdout) and
// writes prediction sets as a refit does, and
// calibrate --report prints the log's report as GET /v1/calibration does.
func TestCalibrateFromTheLog(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("decision_log:\n  path: "+db+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	overconfident(t, db)
	fitsPath := filepath.Join(dir, "fits.json")
	stdout, stderr, err := cli(t, "calibrate", "--from-log", "--config", cfgPath, "--out", fitsPath)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	fits, err := outcomes.LoadFits(fitsPath)
	if err != nil || len(fits.Fits) != 1 || fits.Fits[0].Model != "m" || fits.Fits[0].Bucket != "3-4" || !(fits.Fits[0].Temperature > 1) || fits.Fits[0].Holdout == nil || fits.Revision == "" {
		t.Fatalf("fits %+v, %v", fits, err)
	}
	// It writes prediction sets too, over every outcome, as a refit does:
	// decide can give a set at 0.95 from 80 outcomes.
	if rule, ok := fits.Fits[0].SetFor(0.95); !ok || rule.N != 80 || rule.Coverage != 0.95 {
		t.Errorf("set at 0.95: %+v, %v (sets %+v)", rule, ok, fits.Fits[0].Sets)
	}
	if _, _, err := cli(t, "calibrate", "--from-log", "--config", cfgPath, "--min-cases", "500", "--out", filepath.Join(dir, "none.json")); err == nil {
		t.Error("a bucket under --min-cases was fitted")
	}
	rep, stdout := calibrationReportOf(t, "--config", cfgPath, "--target-error", "0.1")
	if len(rep.Buckets) != 1 || rep.Buckets[0].Outcomes != 80 || rep.TargetError != 0.1 ||
		rep.Buckets[0].Accuracy != 0.5 || len(rep.Buckets[0].Reliability) == 0 {
		t.Fatalf("report: %s", stdout)
	}
	if _, stderr, err := cli(t, "calibrate", "--report", "--from-log", "--config", cfgPath); err == nil || !strings.Contains(stderr, "--report") {
		t.Errorf("--report with --from-log: %v %s", err, stderr)
	}
}

// calibrate --report without --target-error takes the configuration's
// calibration.target_error, as GET /v1/calibration does and its help says;
// a --target-error outside [0, 1) or a --window not positive is a usage
// error naming the flag, with --report as with --from-log.
func TestCalibrateReportTargetError(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("decision_log:\n  path: "+db+"\ncalibration:\n  target_error: 0.05\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		target float64 // 0: a usage error naming the flag
	}{
		{"configured", nil, 0.05},
		{"flag", []string{"--target-error", "0.1"}, 0.1},
		{"over 1", []string{"--target-error", "1.5"}, 0},
		{"negative", []string{"--target-error", "-0.1"}, 0},
		{"window 0", []string{"--window", "0s"}, 0},
		{"window negative", []string{"--window", "-1h"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, err := cli(t, append([]string{"calibrate", "--report", "--config", cfgPath}, c.args...)...)
			if c.target == 0 {
				flag := c.args[0]
				if !errors.Is(err, errUsage) || !strings.Contains(stderr, flag) {
					t.Fatalf("err %v, stderr %q, stdout %s", err, stderr, stdout)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var rep outcomes.CalibrationReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.TargetError != c.target {
				t.Fatalf("target_error %v, want %v (%v)", rep.TargetError, c.target, err)
			}
		})
	}
}

// With the default learning loop (no calibration section, no
// gateway.fits), serve keeps its fits in fits.json in the state folder
// and GET /v1/calibration reports under them; calibrate --report with the
// same configuration and --state-dir reports under the same fits, naming
// their revision, as decide and mcp apply them.
func TestCalibrateReportTakesTheLoopsFits(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("decision_log:\n  keep_states: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	overconfident(t, filepath.Join(dir, "decisions.db"))
	fitsPath := filepath.Join(dir, "fits.json") // where serve's default loop keeps them
	if stdout, stderr, err := cli(t, "calibrate", "--from-log", "--config", cfgPath, "--state-dir", dir, "--out", fitsPath); err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	fits, err := outcomes.LoadFits(fitsPath)
	if err != nil {
		t.Fatal(err)
	}
	rep, stdout := calibrationReportOf(t, "--config", cfgPath, "--state-dir", dir)
	if len(rep.Buckets) != 1 {
		t.Fatalf("report: %s", stdout)
	}
	if b := rep.Buckets[0]; rep.FitVersion != fits.Revision || b.ECECalibrated == b.ECE {
		t.Errorf("fit_version %q (want %q), method %q, ece %v, ece_calibrated %v: the report is not under the loop's fits",
			rep.FitVersion, fits.Revision, b.Method, b.ECE, b.ECECalibrated)
	}
}

// overconfident writes a decision log at db of 80 over-confident answers
// (0.95 on a), right half the time, each with its outcome.
func overconfident(t *testing.T, db string) {
	t.Helper()
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 80 {
		l.Record(decisionlog.Record{RequestID: fmt.Sprint("r", i), QuestionID: "q", Face: decisionlog.FaceSystemOne, Model: "m", Node: "n",
			Kind: decision.Choice, Options: []string{"a", "b", "c"}, EngineDist: []float64{0.95, 0.04, 0.01}})
	}
	for i := range 80 {
		if _, err := l.Outcome(t.Context(), fmt.Sprint("r", i), "q", []string{"a", "b"}[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// With calibration: off, /v1/systemone applies no fits, and GET
// /v1/calibration reports under the fits it applies: none, whatever
// gateway.fits names (decide's). calibrate --report, which prints that
// report, reports under none too: it reported under gateway.fits, naming
// a fit_version and calibrated measures the server's report never gave.
func TestCalibrateReportTakesNoFitsWithCalibrationOff(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	fitsPath := filepath.Join(dir, "fits.json")
	overconfident(t, db)
	fitCfg := filepath.Join(dir, "fit.yaml")
	if err := os.WriteFile(fitCfg, []byte("decision_log:\n  path: "+db+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, err := cli(t, "calibrate", "--from-log", "--config", fitCfg, "--out", fitsPath); err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("calibration: off\ngateway:\n  fits: fits.json\ndecision_log:\n  path: "+db+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, stdout := calibrationReportOf(t, "--config", cfgPath, "--state-dir", dir)
	if len(rep.Buckets) != 1 {
		t.Fatalf("report: %s", stdout)
	}
	if b := rep.Buckets[0]; rep.FitVersion != "" || b.Method != "none" || b.ECECalibrated != b.ECE {
		t.Errorf("fit_version %q, method %q, ece %v, ece_calibrated %v: with calibration off the report is under fits /v1/systemone does not apply",
			rep.FitVersion, b.Method, b.ECE, b.ECECalibrated)
	}
}

// calibrate --report names each configured cascade, as GET
// /v1/calibration does, its stages included.
func TestCalibrateReportNamesTheCascades(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := "decision_log:\n  path: " + filepath.Join(dir, "decisions.db") +
		"\nnodes:\n  - {name: n, url: 'http://127.0.0.1:9', models: [small, large]}\ngateway:\n  chain: [{name: local, model: tiered}]\n" +
		"cascades:\n  - {model: tiered, stages: [small, large]}\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, stdout := calibrationReportOf(t, "--config", cfgPath)
	if len(rep.Cascades) != 1 || rep.Cascades[0].Model != "tiered" {
		t.Fatalf("cascades %+v; want tiered's report, as GET /v1/calibration gives\n%s", rep.Cascades, stdout)
	}
}

// calibrationReportOf runs calibrate --report with args and reads the
// report it prints, failing the test when it fails or prints no report.
func calibrationReportOf(t *testing.T, args ...string) (rep outcomes.CalibrationReport, stdout string) {
	t.Helper()
	stdout, stderr, err := cli(t, append([]string{"calibrate", "--report"}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report %v: %s", err, stdout)
	}
	return rep, stdout
}
