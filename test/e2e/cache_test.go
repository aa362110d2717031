package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// writeFitsFile writes a fits file of one revision, as a refit would:
// whole, then renamed into place.
func writeFitsFile(t *testing.T, path, revision string, fits ...calibration.Fit) {
	t.Helper()
	b, err := json.Marshal(calibration.Fits{Version: calibration.FitsVersion, Created: time.Now().UTC().Format(time.RFC3339), Revision: revision, Fits: fits})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path+".tmp", string(b))
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// writeFits writes a fits file of one revision tempering the decide
// question below.
func writeFits(t *testing.T, path, revision string, temperature float64) {
	t.Helper()
	writeFitsFile(t, path, revision, calibration.Fit{Model: fakeengine.DefaultModel, Kind: decision.Choice, Bucket: calibration.Bucket(3), Temperature: temperature, N: 50})
}

// The decision cache through the built binary: with cache: set, a repeat
// on /v1/systemone is a hit that asks no engine, recorded under its own
// request id so that feedback on it is taken; on /v1/decide likewise,
// until the fits file gets a new revision, when the next answer is a miss
// calibrated by the new fits; the metrics count it all.
func TestCacheThroughTheBinary(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.7, 0.2, 0.1)}})
	t.Cleanup(f.Close)
	dir := t.TempDir()
	fits := filepath.Join(dir, "fits.json")
	writeFits(t, fits, "r1", 2)
	cfg := fmt.Sprintf(`nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s]}
gateway:
  fits: %s
  threshold: 0
  chain:
    - {name: local, model: %s}
decision_log:
  path: %s
cache: {entries: 100, ttl: 10m}
`, f.URL, fakeengine.DefaultModel, fits, fakeengine.DefaultModel, filepath.Join(dir, "decisions.db"))
	c := client()
	s := startServe(t, cfg, serveOpts{})

	ask := choice(fakeengine.DefaultModel, "ticket 1")
	first := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", ask)
	calls := len(f.Inferences())
	again := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", ask)
	if first.Header.Get("X-System1-Cache") != "miss" || again.Header.Get("X-System1-Cache") != "hit" || len(f.Inferences()) != calls {
		t.Fatalf("cache %q then %q; %d engine calls, %d before the repeat", first.Header.Get("X-System1-Cache"), again.Header.Get("X-System1-Cache"), len(f.Inferences()), calls)
	}
	id := again.Header.Get("X-Typesafe-Request-Id")
	if id == "" || id == first.Header.Get("X-Typesafe-Request-Id") {
		t.Fatalf("the hit's request id %q", id)
	}
	if r := do(t, c, http.MethodPost, s.URL+"/v1/feedback", "", fmt.Sprintf(`{"request_id":%q,"outcome":"billing"}`, id)); r.Status != http.StatusOK {
		t.Fatalf("feedback on the hit: %d %s", r.Status, r.Body)
	}

	decide := func() gateway.Response {
		t.Helper()
		r := do(t, c, http.MethodPost, s.URL+"/v1/decide", "", `{"question":"Which team?","options":["billing","technical","sales"]}`)
		var res gateway.Response
		if err := json.Unmarshal(r.Body, &res); err != nil || res.Status != gateway.Decided {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		return res
	}
	if a, b := decide(), decide(); a.Cache != "miss" || b.Cache != "hit" || a.FitVersion != "r1" || b.FitVersion != "r1" || *a.Confidence != *b.Confidence {
		t.Fatalf("decide: %+v, then %+v", a, b)
	}
	writeFits(t, fits, "r2", 0.5)
	// The fits file is looked at once a second; until then r1's answer
	// is served, after it never.
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := decide()
		if res.FitVersion == "r2" {
			if res.Cache != "miss" {
				t.Fatalf("the first answer under the new fits: cache %q", res.Cache)
			}
			break
		}
		if res.Cache != "hit" || time.Now().After(deadline) {
			t.Fatalf("before the new fits were read: %+v", res)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res := decide(); res.Cache != "hit" || res.FitVersion != "r2" {
		t.Fatalf("repeat under the new fits: %+v", res)
	}
	m := string(do(t, c, http.MethodGet, s.URL+"/metrics", "", "").Body)
	for _, want := range []string{"system1_cache_misses_total 3", "system1_cache_bypassed_total 0", "system1_cache_coalesced_total 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if !strings.Contains(m, "system1_cache_hits_total ") || strings.Contains(m, "system1_cache_hits_total 0\n") {
		t.Errorf("metrics count no hit")
	}
}
