package main

import (
	"math"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/decision"
)

// calibrate asks a case file and writes, with each fit, the gate its
// calibrated held-out cases suggest at --target-error: a threshold in
// (0, 1] whose bound is under the target, over exactly the held-out
// cases, which decide then grades by. A bucket whose held-out cases
// pass no bound gets no gate, and stdout says so.
func TestCalibrateWritesGates(t *testing.T) {
	dir := t.TempDir()
	rec := recording{}
	cases := filepath.Join(dir, "cases.jsonl")
	synthCases(t, cases, "gate", 300, 3, 0.5, rec)
	rp := &replay{model: "replay-1.0", rec: rec}
	srv := httptest.NewServer(rp)
	defer srv.Close()

	fitsPath := filepath.Join(dir, "fits.json")
	stdout, stderr, err := cli(t, "calibrate", "--endpoint", srv.URL, "--model", "jev-latest", "--key-env", "REPLAY_KEY",
		"--concurrency", "8", "--holdout", "0.5", "--target-error", "0.1", "--out", fitsPath, cases)
	if err != nil {
		t.Fatalf("calibrate: %v\n%s", err, stderr)
	}
	fits := readFits(t, fitsPath)
	if len(fits.Fits) != 3 {
		t.Fatalf("%d fits:\n%s", len(fits.Fits), stdout)
	}
	gated := 0
	for _, f := range fits.Fits {
		g := f.Gate
		if g == nil {
			if !strings.Contains(stdout, "no gate for replay-1.0, "+string(f.Kind)+", bucket "+f.Bucket) {
				t.Errorf("%s has no gate and stdout does not say so:\n%s", f.Kind, stdout)
			}
			continue
		}
		gated++
		if !(g.Threshold > 0 && g.Threshold <= 1) || g.TargetError != 0.1 || g.On != calibration.GateOnHeldOut ||
			f.Holdout == nil || g.N != f.Holdout.N || g.Above < 1 || g.Above > g.N || g.WrongAbove > g.Above || !(g.UpperBound < g.TargetError) ||
			math.Abs(g.UpperBound-fitting.ClopperPearsonUpper(g.WrongAbove, g.Above, fitting.GateConfidence)) > 1e-12 {
			t.Errorf("%s: gate %+v (holdout %+v)", f.Kind, *g, f.Holdout)
		}
		if !strings.Contains(stdout, "gate for replay-1.0, "+string(f.Kind)+", bucket "+f.Bucket) {
			t.Errorf("stdout does not name %s's gate:\n%s", f.Kind, stdout)
		}
		// A noul's confidence is at least 1/2; a choice's at least 1/4.
		if f.Kind == decision.Noul && g.Threshold < 0.5 {
			t.Errorf("noul gate %v under 1/2", g.Threshold)
		}
	}
	// Half of 300 cases held out, a 10% target: the sharpened replay's
	// most confident answers pass the bound in at least one bucket.
	if gated == 0 {
		t.Fatalf("no fit has a gate:\n%s", stdout)
	}
	t.Logf("calibrate:\n%s", stdout)
}
