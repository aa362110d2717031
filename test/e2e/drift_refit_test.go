package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/outcomes"
	"system1/internal/testbin"
)

// A refit of an unchanged model raises no drift alarm, through the
// binary: answers of an over-confident model logged three hours ago,
// half of them wrong, are fitted by system1 calibrate --from-log; system1
// serve then answers the same model with the fit applied (its served
// confidences far lower), and GET /v1/calibration's drift, which compares
// the last hour with the day before, does not alarm: it reads what the
// engine answered, before any calibrator.
func TestRefitRaisesNoDriftAlarmThroughTheBinary(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.97, 0.02, 0.01)}})
	t.Cleanup(f.Close)
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	fitsPath := filepath.Join(dir, "fits.json")
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-3 * time.Hour)
	for i := range 80 {
		l.Record(decisionlog.Record{RequestID: fmt.Sprint("old-", i), QuestionID: "dept", Time: before, Face: decisionlog.FaceSystemOne, Model: fakeengine.DefaultModel,
			Node: "n1", Kind: decision.Choice, Options: []string{"billing", "technical", "sales"}, EngineDist: []float64{0.97, 0.02, 0.01}})
	}
	if err := l.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 80 {
		if _, err := l.Outcome(t.Context(), fmt.Sprint("old-", i), "dept", []string{"billing", "technical"}[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s]}
gateway:
  fits: %s
  threshold: 0
  chain:
    - {name: local, model: %s}
calibration: apply
decision_log:
  path: %s
drift: {window: 1h, reference: 24h}
`, f.URL, fakeengine.DefaultModel, fitsPath, fakeengine.DefaultModel, db)
	cfgPath := filepath.Join(dir, "system1.yaml")
	writeFile(t, cfgPath, withoutCanary(cfg))
	cmd := exec.Command(testbin.Binary(t), "calibrate", "--from-log", "--config", cfgPath, "--out", fitsPath)
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("calibrate --from-log: %v\n%s", err, out)
	}

	c := client()
	s := startServe(t, cfg, serveOpts{})
	for i := range 40 {
		r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice(fakeengine.DefaultModel, fmt.Sprintf("ticket %d", i)))
		if r.Status != http.StatusOK || r.Header.Get("X-System1-Calibrated") != "true" {
			t.Fatalf("%d calibrated %q: %s", r.Status, r.Header.Get("X-System1-Calibrated"), r.Body)
		}
	}
	rep := do(t, c, http.MethodGet, s.URL+"/v1/calibration", "", "")
	var cr outcomes.CalibrationReport
	if err := json.Unmarshal(rep.Body, &cr); err != nil || rep.Status != http.StatusOK {
		t.Fatalf("%d %v: %s", rep.Status, err, rep.Body)
	}
	if len(cr.Drift) != 1 {
		t.Fatalf("drift %+v", cr.Drift)
	}
	d := cr.Drift[0]
	if d.Alarm || d.Reference != 80 || d.Current != 40 {
		t.Errorf("a refit of an unchanged model: %+v", d)
	}
}
