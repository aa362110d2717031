package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/gateway"
	"system1/internal/testbin"
)

// What the calibration loop chose is what every face serves: a fit with
// a temperature and a confidence map is applied whole, the map after the
// temperature, by /v1/systemone, /v1/decide and system1 decide alike,
// each answer equal to the fit applied offline to the engine's
// distribution, and the step's version names the map.
func TestConfidenceMapServedOnEveryFace(t *testing.T) {
	engine := decision.Distribution{0.6, 0.3, 0.1}
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(engine...)}})
	t.Cleanup(f.Close)
	// Its set at 0.9 takes only an option at 0.9 or more: none here.
	fit := calibration.Fit{Model: fakeengine.DefaultModel, Kind: decision.Choice, Bucket: "3-4", N: 300, Date: "2026-12-04",
		Sets: []calibration.Conformal{{Method: calibration.ConformalLAC, Coverage: 0.9, N: 300, Threshold: 0.1}}}
	fit.SetCalibrator(calibration.TemperatureCalibrator(0.8))
	fit.ConfidenceMap = &calibration.ConfidenceMap{X: []float64{0.3, 0.9}, Y: []float64{0.35, 0.75}}
	// A yes/no fit a refit wrote for its prediction sets alone: no
	// calibrator was learnt, so its answers are not calibrated.
	setsOnly := calibration.Fit{Model: fakeengine.DefaultModel, Kind: decision.Noul, Bucket: "2", Temperature: 1, N: 300,
		Sets: []calibration.Conformal{{Method: calibration.ConformalLAC, Coverage: 0.9, N: 300, Threshold: 0.9}}}
	fits := &calibration.Fits{Version: calibration.FitsVersion, Created: "2026-12-04T00:00:00Z", Revision: "r1", Fits: []calibration.Fit{fit, setsOnly}}
	data, err := fits.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fitsPath := filepath.Join(dir, "fits.json")
	writeFile(t, fitsPath, string(data))
	// Offline, the fit's one composition: the temperature, then the
	// answer's probability mapped. The map must move it, or this test
	// could not tell a served map from none.
	offline := fit.Apply(engine)
	tempered := calibration.TemperatureCalibrator(0.8).Apply(engine)
	if want := fit.ConfidenceMap.Map(tempered[0]); math.Abs(offline[0]-want) > 1e-12 || math.Abs(want-tempered[0]) < 0.05 {
		t.Fatalf("the fit gives %v, tempered %v, the map %v", offline, tempered, want)
	}
	wantStep := "T=0.8/map="
	cfg := fmt.Sprintf(`nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s]}
gateway:
  fits: %s
  threshold: 0
  chain:
    - {name: local, model: %s}
calibration: apply
decision_log: {off: true}
`, f.URL, fakeengine.DefaultModel, fitsPath, fakeengine.DefaultModel)
	near := func(face string, got []float64, tol float64) {
		t.Helper()
		if len(got) != len(offline) {
			t.Fatalf("%s: %v, offline %v", face, got, offline)
		}
		for i := range got {
			if math.Abs(got[i]-offline[i]) > tol {
				t.Errorf("%s served %v, the fit applied offline gives %v", face, got, offline)
				return
			}
		}
	}
	decided := func(face string, res gateway.Response) {
		t.Helper()
		if !res.Calibrated || res.Calibration == nil || len(res.Calibration.Steps) != 1 || !strings.Contains(res.Calibration.Steps[0].Version, wantStep) {
			t.Fatalf("%s: calibrated %v, steps %+v", face, res.Calibrated, res.Calibration)
		}
		var got []float64
		for _, p := range res.Probabilities {
			got = append(got, p.P)
		}
		near(face, got, 0.001) // three decimals, rounded to sum to 1
	}

	c := client()
	s := startServe(t, cfg, serveOpts{})
	r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice(fakeengine.DefaultModel, "a ticket"))
	if r.Status != http.StatusOK || r.Header.Get("X-System1-Calibrated") != "true" || !strings.Contains(r.Header.Get("X-System1-Steps"), wantStep) {
		t.Fatalf("/v1/systemone: %d calibrated %q steps %q %s", r.Status, r.Header.Get("X-System1-Calibrated"), r.Header.Get("X-System1-Steps"), r.Body)
	}
	var sys struct {
		Answers map[string]struct {
			Probabilities map[string]float64 `json:"probabilities"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(r.Body, &sys); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	a := sys.Answers["dept"].Probabilities
	near("/v1/systemone", []float64{a["billing"], a["technical"], a["sales"]}, 0.005) // the wire's two decimals

	d := do(t, c, http.MethodPost, s.URL+"/v1/decide", "", `{"question":"Which team?","options":["billing","technical","sales"]}`)
	var res gateway.Response
	if err := json.Unmarshal(d.Body, &res); err != nil {
		t.Fatalf("%v: %s", err, d.Body)
	}
	decided("/v1/decide", res)

	// An empty set is a set: written, with its note, graded escalate, and
	// the rationale does not say to act.
	d = do(t, c, http.MethodPost, s.URL+"/v1/decide", "", `{"question":"Which team?","options":["billing","technical","sales"],"coverage":0.9}`)
	res = gateway.Response{}
	if err := json.Unmarshal(d.Body, &res); err != nil {
		t.Fatalf("%v: %s", err, d.Body)
	}
	if !bytes.Contains(d.Body, []byte(`"prediction_set":[]`)) || !strings.Contains(res.SetNote, "empty") || res.SetCoverage == nil || res.Grade != gateway.GradeEscalate ||
		strings.Contains(res.Rationale, "fast intuition: act on it") || !strings.Contains(res.Rationale, "Do not act on it") {
		t.Errorf("an empty set on decide: %s", d.Body)
	}

	// The sets-only fit gives a set, and says the answer is not calibrated.
	d = do(t, c, http.MethodPost, s.URL+"/v1/decide", "", `{"question":"Is it?","coverage":0.9}`)
	res = gateway.Response{}
	if err := json.Unmarshal(d.Body, &res); err != nil {
		t.Fatalf("%v: %s", err, d.Body)
	}
	if res.Calibrated || res.FitVersion != "" || res.Calibration == nil || len(res.Calibration.Steps) != 0 || res.PredictionSet == nil || !strings.Contains(res.Rationale, "uncalibrated") {
		t.Errorf("a sets-only fit: calibrated %v, fit_version %q, steps %+v, set %v: %s", res.Calibrated, res.FitVersion, res.Calibration, res.PredictionSet, d.Body)
	}
	r = do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", noul(fakeengine.DefaultModel, "a ticket"))
	if r.Status != http.StatusOK || r.Header.Get("X-System1-Calibrated") != "false" {
		t.Errorf("/v1/systemone with a sets-only fit: %d calibrated %q warnings %q", r.Status, r.Header.Get("X-System1-Calibrated"), r.Header.Get("X-System1-Warnings"))
	}

	cli := filepath.Join(t.TempDir(), "system1.yaml")
	writeFile(t, cli, cfg)
	cmd := exec.Command(testbin.Binary(t), "decide", "--config", cli, "--json", "Which team?", "billing", "technical", "sales")
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	var cres gateway.Response
	if err := json.Unmarshal(out, &cres); err != nil {
		t.Fatalf("system1 decide: %v\n%s%s", err, out, stderr.String())
	}
	decided("system1 decide", cres)
}
