package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// system1_decide with coverage gives the prediction set its fit holds:
// the options that together hold the right answer at the level asked,
// the level and the outcomes it rests on, graded act only when the set
// is the decision alone; without a set at that level it says why; a
// coverage outside [0.5, 0.99] is the caller's error, naming the field.
func TestDecideCoverageOverMCP(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp}) // Halving: 4/7, 2/7, 1/7
	t.Cleanup(f.Close)
	fits := calibration.Fits{Version: calibration.FitsVersion, Revision: "r", Fits: []calibration.Fit{{
		Model: fakeengine.DefaultModel, Kind: decision.Choice, Bucket: "3-4", Temperature: 1,
		// p >= 0.25 is in the set: the first two options.
		Sets: []calibration.Conformal{{Method: calibration.ConformalLAC, Coverage: 0.9, N: 400, Threshold: 0.75}},
	}}}
	data, err := json.Marshal(fits)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, "")
	w.write("fits.json", string(data))
	w.write("config.yaml", fmt.Sprintf(noCanary+"gateway:\n  threshold: 0.3\n  fits: %s\n  chain:\n    - {name: local, model: %s}\nnodes:\n  - {name: n, url: %s, dialect: llamacpp, models: [%s]}\n",
		filepath.Join(w.dir, "fits.json"), fakeengine.DefaultModel, f.URL, fakeengine.DefaultModel))
	s := w.start()
	ask := func(coverage any) *gateway.Response {
		t.Helper()
		return s.decide(map[string]any{"question": "Which team?", "options": []string{"billing", "technical", "sales"}, "coverage": coverage})
	}

	res := ask(0.9)
	if res.Status != gateway.Decided || !slices.Equal(res.PredictionSet, []string{"billing", "technical"}) ||
		res.SetCoverage == nil || *res.SetCoverage != 0.9 || res.SetOutcomes == nil || *res.SetOutcomes != 400 {
		t.Fatalf("coverage 0.9: status %s, set %v, coverage %v, outcomes %v", res.Status, res.PredictionSet, res.SetCoverage, res.SetOutcomes)
	}
	if res.Grade == "act" {
		t.Errorf("graded act with a set of two: %+v", res)
	}
	if res := ask(0.95); res.PredictionSet != nil || res.SetNote == "" {
		t.Errorf("coverage 0.95, which no set of the fit reaches: set %v, note %q", res.PredictionSet, res.SetNote)
	}
	for _, bad := range []any{0.3, 1, "high"} {
		res := ask(bad)
		if res.Status != gateway.Failed || res.Error == nil || res.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(res.Error.Message, "coverage") {
			t.Errorf("coverage %v: status %s, error %+v", bad, res.Status, res.Error)
		}
	}
	if got := len(f.Inferences()); got != 2 {
		t.Errorf("%d engine calls, want one for each valid call: the invalid ones ask nothing", got)
	}
}

// The fits serve's default learning loop keeps in the state folder (no
// gateway.fits, no calibration section, the decision log on) are the
// ones system1_decide applies from that folder too; calibration: off
// applies none.
func TestDecideAppliesTheFitsTheLoopLearnt(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	fits := calibration.Fits{Version: calibration.FitsVersion, Revision: "learnt", Fits: []calibration.Fit{{
		Model: fakeengine.DefaultModel, Kind: decision.Choice, Bucket: "3-4", Temperature: 2,
	}}}
	data, err := json.Marshal(fits)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		calibration string
		applied     bool
	}{{"", true}, {"calibration: off\n", false}} {
		w := newWorld(t, "")
		if err := os.MkdirAll(w.stateDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.stateDir, "fits.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		w.write("config.yaml", fmt.Sprintf(noCanary+c.calibration+"gateway:\n  threshold: 0\n  chain:\n    - {name: local, model: %s}\nnodes:\n  - {name: n, url: %s, dialect: llamacpp, models: [%s]}\n",
			fakeengine.DefaultModel, f.URL, fakeengine.DefaultModel))
		res := w.start().decide(map[string]any{"question": "Which team?", "options": []string{"billing", "technical", "sales"}})
		if res.Status != gateway.Decided || res.Calibrated != c.applied || (c.applied && res.FitVersion != "learnt") {
			t.Errorf("%q: status %s, calibrated %v, fit %q; want calibrated %v", c.calibration, res.Status, res.Calibrated, res.FitVersion, c.applied)
		}
	}
}

// A session started before serve's default loop wrote any fits (no
// fits.json in the state folder yet) applies them once a refit writes
// them, as docs/decision-log.md says serve and mcp do with a refit:
// without a restart.
func TestDecideAppliesTheLoopsFirstFitsWithoutARestart(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	w := newWorld(t, "")
	w.write("config.yaml", fmt.Sprintf(noCanary+"gateway:\n  threshold: 0\n  chain:\n    - {name: local, model: %s}\nnodes:\n  - {name: n, url: %s, dialect: llamacpp, models: [%s]}\n",
		fakeengine.DefaultModel, f.URL, fakeengine.DefaultModel))
	s := w.start()
	ask := func() *gateway.Response {
		return s.decide(map[string]any{"question": "Which team?", "options": []string{"billing", "technical", "sales"}})
	}
	if res := ask(); res.Status != gateway.Decided || res.Calibrated {
		t.Fatalf("before any fit: status %s, calibrated %v", res.Status, res.Calibrated)
	}
	// What a refit of serve's loop writes, in the state folder.
	fits := calibration.Fits{Version: calibration.FitsVersion, Revision: "learnt", Fits: []calibration.Fit{{
		Model: fakeengine.DefaultModel, Kind: decision.Choice, Bucket: "3-4", Temperature: 2,
	}}}
	data, err := json.Marshal(fits)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(w.stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.stateDir, "fits.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var res *gateway.Response
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if res = ask(); res.Calibrated {
			break
		}
	}
	if res.Status != gateway.Decided || !res.Calibrated || res.FitVersion != "learnt" {
		t.Errorf("10 s after the loop wrote its first fits: status %s, calibrated %v, fit %q; want them applied", res.Status, res.Calibrated, res.FitVersion)
	}
}
