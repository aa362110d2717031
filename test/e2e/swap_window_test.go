package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// A swap mid-stream keeps the uncertain window out of both builds' fits,
// through the binary: the fake engine's answers change while its identity
// does not (a GGUF copied over the served path), so only a canary can see
// it. With fingerprint.check_every_answers the canary is read again after
// every 10 answers; the answers between the last read that confirmed the
// old build and the read that found the new one carry the old build's
// fingerprint, though the new build gave most of them. serve's refit of
// the old build takes only the answers before that window, its refit of
// the new build only those after it, and the window, kept in the decision
// log, holds every answer the new build gave under the old fingerprint.
func TestSwapKeepsTheUncertainWindowOutOfBothFitsThroughTheBinary(t *testing.T) {
	old, swapped := fakeengine.Probs(0.9, 0.06, 0.04), fakeengine.Probs(0.04, 0.9, 0.06)
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: old}})
	t.Cleanup(f.Close)
	dir := t.TempDir()
	db := filepath.Join(dir, "decisions.db")
	model := fakeengine.DefaultModel
	const every = 10
	cfg := fmt.Sprintf(`nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s]}
probe_every: 1h
fingerprint: {canary_every: 1h, check_every_answers: %d}
gateway:
  fits: %s
  threshold: 0
  chain:
    - {name: local, model: %s}
calibration:
  mode: apply
  refit_every: 200ms
  min_outcomes: 5
decision_log:
  path: %s
`, f.URL, model, every, filepath.Join(dir, "fits.json"), model, db)
	s := startServe(t, cfg, serveOpts{})
	c := client()

	// The first probe, at start, makes the reference.
	var first fleet.Fingerprint
	for deadline := time.Now().Add(time.Minute); first.ID == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no fingerprint in /health: %s", do(t, c, http.MethodGet, s.URL+"/health", "", "").Body)
		}
		first = s.build(t, model)
	}
	var ids []string
	ask := func(tag string, i int) reply {
		r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice(model, fmt.Sprintf("%s ticket %d", tag, i)))
		if r.Status != http.StatusOK {
			t.Fatalf("%s %d: %d %s", tag, i, r.Status, r.Body)
		}
		ids = append(ids, r.Header.Get("X-Typesafe-Request-Id"))
		return r
	}
	// canaryCalls is the engine calls of the canary reads done so far:
	// the metric is counted once a read is over.
	canaryCalls := func() int {
		m := regexp.MustCompile(`system1_canary_calls_total\{[^}]*outcome="ok"[^}]*\} (\d+)`).FindSubmatch(do(t, c, http.MethodGet, s.URL+"/metrics", "", "").Body)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	read := canaryCalls()
	if read == 0 {
		t.Fatal("the first probe's canary read is not counted")
	}
	// 15 answers: the 10th starts a check, which confirms the build; it
	// is waited for, so that the swap does not fall in the middle of a
	// canary read.
	for i := range 15 {
		ask("old", i)
	}
	for deadline := time.Now().Add(time.Minute); canaryCalls() < 2*read; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the check after %d answers read no canary (%d calls, %d a read)", every, canaryCalls(), read)
		}
	}
	// The swap: other answers, the same identity. Answers go on until a
	// check after every answers finds it.
	f.Set(fakeengine.Behavior{Logprobs: swapped})
	var second fleet.Fingerprint
	for i := 0; ; i++ {
		if i == 20*every {
			t.Fatalf("no change seen in %d answers after the swap: %+v", i, second)
		}
		ask("swapped", i)
		if second = s.build(t, model); second.ID != first.ID {
			t.Logf("the change was seen after %d answers of the new build", i+1)
			break
		}
	}
	for i := range 30 {
		ask("new", i)
	}
	// Outcomes for every answer: half billing, half technical.
	var items []map[string]string
	for i, id := range ids {
		items = append(items, map[string]string{"request_id": id, "question": "dept", "outcome": []string{"billing", "technical"}[i%2]})
	}
	body, _ := json.Marshal(map[string]any{"outcomes": items})
	if r := do(t, c, http.MethodPost, s.URL+"/v1/feedback", "", string(body)); r.Status != http.StatusOK {
		t.Fatalf("feedback: %d %s", r.Status, r.Body)
	}
	refits := s.waitLog(t, regexp.MustCompile(`msg="refit [^"]*" request_id=- model=\S+ fingerprint=(\S+) .*outcomes=(\d+) `), 2, 2*time.Minute)
	got := map[string]int{}
	for _, m := range refits {
		n, _ := strconv.Atoi(m[2])
		got[m[1]] = n
	}
	s.signal(t, syscall.SIGINT)
	if code := s.wait(t, time.Minute); code != 0 {
		t.Fatalf("serve exited %d", code)
	}

	// What the log holds: the window, and which build gave each answer.
	l, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(t.Context())
	ws, err := l.Uncertain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].Node != "n1" || ws[0].Model != model || ws[0].Was != first.ID || ws[0].Now != second.ID || !ws[0].From.Before(ws[0].To) {
		t.Fatalf("uncertain windows %+v; want one of n1 %s from %s to %s", ws, model, first.ID, second.ID)
	}
	w := ws[0]
	es, err := l.Window(t.Context(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour), model)
	if err != nil {
		t.Fatal(err)
	}
	var before, inside, after, newUnderOld int
	for _, e := range es {
		byNew := e.EngineDist[1] > 0.5
		switch {
		case e.Time.Before(w.From):
			if e.Fingerprint != first.ID || byNew {
				t.Errorf("an answer before the window, at %s: build %s, %v", e.Time, e.Fingerprint, e.EngineDist)
			}
			before++
		case !e.Time.After(w.To):
			inside++
		case !byNew:
			t.Errorf("an answer of the old build after the window, at %s: build %s, %v", e.Time, e.Fingerprint, e.EngineDist)
		case e.Fingerprint == second.ID:
			after++
		}
		// One that read its build just before the change was seen may be
		// recorded after the window under the old build: kept out too.
		if byNew && e.Fingerprint == first.ID {
			newUnderOld++
			if e.Time.Before(w.From) {
				t.Errorf("an answer of the new build before the window, at %s (window %s to %s)", e.Time, w.From, w.To)
			}
		}
	}
	t.Logf("answers: %d before the window, %d in it (%d of the new build under the old fingerprint), %d after; refits %v", before, inside, newUnderOld, after, got)
	if newUnderOld == 0 || before == 0 || after == 0 {
		t.Fatalf("the stream did not make the case: %d before, %d of the new build under the old fingerprint, %d after", before, newUnderOld, after)
	}
	if got[first.ID] != before || got[second.ID] != after {
		t.Errorf("refits took %d outcomes of build %s and %d of %s; want %d and %d, the answers outside the window", got[first.ID], first.ID, got[second.ID], second.ID, before, after)
	}
}
