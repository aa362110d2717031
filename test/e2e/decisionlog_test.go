package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// The decision log through the built binary: answers of system1 serve are
// recorded in the SQLite file its configuration names; outcomes through
// POST /v1/feedback make serve refit on its own (calibration.refit_every),
// adopt the fit, write it as a new version and apply it without a
// restart; the file stays across a graceful restart and a SIGKILL in the
// middle of traffic, and opens clean after.
func TestDecisionLogThroughTheBinary(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.97, 0.02, 0.01)}})
	t.Cleanup(f.Close)
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	cfg := fmt.Sprintf(`nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s]}
gateway:
  fits: %s
  threshold: 0
  chain:
    - {name: local, model: %s}
calibration:
  mode: apply
  refit_every: 200ms
  min_outcomes: 40
decision_log:
  path: %s
`, f.URL, fakeengine.DefaultModel, filepath.Join(dir, "fits.json"), fakeengine.DefaultModel, db)
	c := client()
	s := startServe(t, cfg, serveOpts{})
	var ids []string
	for i := range 60 {
		r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice(fakeengine.DefaultModel, fmt.Sprintf("ticket %d", i)))
		if r.Status != http.StatusOK || r.Header.Get("X-System1-Calibrated") != "false" {
			t.Fatalf("%d %s (calibrated %q)", r.Status, r.Body, r.Header.Get("X-System1-Calibrated"))
		}
		ids = append(ids, r.Header.Get("X-Typesafe-Request-Id"))
	}
	// The engine says billing at 0.97; it is right half the time.
	var items []map[string]string
	for i, id := range ids {
		out := "billing"
		if i%2 == 1 {
			out = []string{"technical", "sales"}[i/2%2]
		}
		items = append(items, map[string]string{"request_id": id, "question": "dept", "outcome": out})
	}
	body, _ := json.Marshal(map[string]any{"outcomes": items})
	if r := do(t, c, http.MethodPost, s.URL+"/v1/feedback", "", string(body)); r.Status != http.StatusOK {
		t.Fatalf("feedback: %d %s", r.Status, r.Body)
	}
	m := s.waitLog(t, regexp.MustCompile(`msg="refit adopted" request_id=- model=\S+ fingerprint=\S+ .* calibrator="?T=([0-9.]+)[^ ]* .*out-of-fold NLL ([0-9.]+) against ([0-9.]+).* revision=(\S+)`), 1, time.Minute)
	rev := m[0][4]
	t.Logf("serve refit on its own: T=%s, out-of-fold NLL %s (was %s), revision %s", m[0][1], m[0][2], m[0][3], rev)
	// Applied without a restart, on both routes (the fits file is looked
	// at once a second).
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice(fakeengine.DefaultModel, "after the refit"))
		if r.Header.Get("X-System1-Calibrated") == "true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refit was not applied: %s", r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d := do(t, c, http.MethodPost, s.URL+"/v1/decide", "", `{"question":"Which team?","options":["billing","technical","sales"],"request_id":"after"}`)
	var res gateway.Response
	if err := json.Unmarshal(d.Body, &res); err != nil || !res.Calibrated || res.FitVersion != rev {
		t.Fatalf("decide after the refit: %s", d.Body)
	}
	rep := do(t, c, http.MethodGet, s.URL+"/v1/calibration", "", "")
	if rep.Status != http.StatusOK || !strings.Contains(string(rep.Body), `"ece_calibrated"`) || !strings.Contains(string(rep.Body), `"reliability"`) {
		t.Fatalf("report: %d %s", rep.Status, rep.Body)
	}
	metrics := do(t, c, http.MethodGet, s.URL+"/metrics", "", "")
	if !strings.Contains(string(metrics.Body), "system1_decision_log_dropped_total 0") || !strings.Contains(string(metrics.Body), "system1_decision_log_written_total") {
		t.Errorf("metrics lack the decision log's counters")
	}
	s.signal(t, syscall.SIGINT)
	if code := s.wait(t, time.Minute); code != 0 {
		t.Fatalf("serve exited %d", code)
	}

	// Restarted: an outcome for an answer given before is matched.
	s = startServe(t, cfg, serveOpts{})
	if r := do(t, c, http.MethodPost, s.URL+"/v1/feedback", "", `{"request_id":"after","outcome":"technical"}`); r.Status != http.StatusOK {
		t.Fatalf("feedback after a restart: %d %s", r.Status, r.Body)
	}
	// SIGKILL while answers are being recorded: once the load has had
	// answers (the loaders ask until the kill), however long that takes.
	var wg sync.WaitGroup
	var answeredLoad atomic.Int64
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := try(c, http.MethodPost, s.URL+"/v1/systemone", "", choice(fakeengine.DefaultModel, fmt.Sprintf("load %d %d", w, i)))
				if err != nil {
					return
				}
				if r.Status == http.StatusOK {
					answeredLoad.Add(1)
				}
			}
		})
	}
	for deadline := time.Now().Add(time.Minute); answeredLoad.Load() < 20; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the load got %d answers in a minute", answeredLoad.Load())
		}
	}
	s.signal(t, syscall.SIGKILL)
	<-s.exited
	close(stop)
	wg.Wait()

	// The file opens clean; what was committed is there.
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: db})
	if err != nil {
		t.Fatalf("the log after SIGKILL: %v", err)
	}
	es, err := l.Lookup(t.Context(), "after")
	if err != nil || len(es) != 1 || es[0].Outcome == nil || es[0].Outcome.Value != "technical" || !strings.HasSuffix(es[0].Steps[0].Version, "@"+rev) {
		t.Fatalf("after SIGKILL: %+v %v", es, err)
	}
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s = startServe(t, cfg, serveOpts{})
	if r := do(t, c, http.MethodPost, s.URL+"/v1/feedback", "", `{"request_id":"`+ids[0]+`","question":"dept","outcome":"sales"}`); r.Status != http.StatusOK {
		t.Fatalf("feedback after SIGKILL and a clean start: %d %s", r.Status, r.Body)
	}
}
