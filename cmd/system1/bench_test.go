package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/bench"
	"system1/internal/calibration"
	"system1/internal/cases"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/systemone"
)

// A recording is what a System One endpoint answered to each state: per
// question, the distribution. The replay endpoint answers from it.
type recording map[string][]decision.Distribution

// replay is a fake System One endpoint that replays recorded
// distributions in Jev's wire format (two decimals, largest remainder),
// as system1's own /v1/systemone writes them. States listed in fail get
// that status instead, and those in malformed a reply whose probabilities
// do not sum to 1, which every real client refuses.
type replay struct {
	model     string
	rec       recording
	fail      map[string]int
	malformed map[string]bool
	asked     atomic.Int64
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp.asked.Add(1)
	body, _ := io.ReadAll(r.Body)
	p := systemone.ParseRequest(body)
	if ps := p.Validate(cases.Limits()); len(ps) > 0 {
		w.WriteHeader(http.StatusUnprocessableEntity)
		w.Write(systemone.AppendValidationError(nil, systemone.InBody, ps))
		return
	}
	var state string
	_ = json.Unmarshal(p.State, &state)
	if code := rp.fail[state]; code != 0 {
		w.WriteHeader(code)
		w.Write(systemone.AppendError(nil, systemone.Unavailable, "replay: told to fail "+state))
		return
	}
	ds, ok := rp.rec[state]
	if !ok || len(ds) != len(p.Questions) {
		w.WriteHeader(http.StatusNotFound)
		w.Write(systemone.AppendError(nil, systemone.NotFound, "replay: nothing recorded for "+state))
		return
	}
	out := systemone.Response{Model: rp.model, Questions: p.Questions}
	for i, q := range p.Questions {
		a, err := decision.NewAnswer(q, ds[i], 2)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(systemone.AppendError(nil, systemone.Internal, err.Error()))
			return
		}
		if rp.malformed[state] && a.Probabilities != nil {
			a.Probabilities[0] = math.Max(0, a.Probabilities[0]-0.1)
		}
		out.Answers = append(out.Answers, a)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out.AppendJSON(nil))
}

// sharpen is the over-confidence the replay adds on purpose: p_i^(1/t)
// renormalised, t < 1.
func sharpen(d decision.Distribution, t float64) decision.Distribution { return d.Temper(t) }

// synthCases writes a case file of n cases per kind (choice over 4
// options, noul, score over 5 levels) and records, for each, a
// distribution that is calibrated by construction (the expected answer is
// drawn from it) and then sharpened by temperature t, so the replay is
// over-confident by exactly 1/t.
func synthCases(t *testing.T, path, prefix string, n int, seed uint64, temp float64, rec recording) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	draw := func(k int) (decision.Distribution, int) {
		z := make([]float64, k)
		found := make([]bool, k)
		scale := 0.3 + 2.7*rng.Float64()
		top := math.Inf(-1)
		for i := range z {
			z[i], found[i] = scale*rng.NormFloat64(), true
			top = math.Max(top, z[i])
		}
		for i := range z {
			z[i] -= top // log-probabilities up to a constant, as FromLogprobs wants them
		}
		p, err := decision.FromLogprobs(z, found)
		if err != nil {
			t.Fatal(err)
		}
		u, y := rng.Float64(), k-1
		for i, q := range p {
			if u < q {
				y = i
				break
			}
			u -= q
		}
		return p, y
	}
	for i := range n {
		for _, kind := range []decision.Kind{decision.Choice, decision.Noul, decision.Score} {
			id := fmt.Sprintf("%s-%s-%d", prefix, kind, i)
			state := "synthetic case " + id
			var q, expected string
			var p decision.Distribution
			var y int
			switch kind {
			case decision.Choice:
				p, y = draw(4)
				keys := []string{"world", "sports", "business", "scitech"}
				q = `{"type":"choice","instructions":"Topic?","criteria":{"world":"w","sports":"s","business":"b","scitech":"t"}}`
				expected = `"` + keys[y] + `"`
			case decision.Noul:
				p, y = draw(2)
				q = `{"type":"noul","instructions":"Positive?"}`
				expected = fmt.Sprint(y == 0)
			case decision.Score:
				p, y = draw(5)
				q = `{"type":"score","instructions":"How positive?","criteria":["very negative","negative","neutral","positive","very positive"]}`
				expected = fmt.Sprint(y)
			}
			fmt.Fprintf(&b, `{"id":%q,"set":"synth-%s","state":%q,"questions":{"q":%s},"expected":{"q":%s}}`+"\n", id, kind, state, q, expected)
			rec[state] = []decision.Distribution{sharpen(p, temp)}
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// cli runs the command line in-process, returning stdout and stderr.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(k string) string {
		if k == "REPLAY_KEY" {
			return "sk-replay"
		}
		return ""
	}, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func readReport(t *testing.T, path string) (*bench.Report, map[string]any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	return &rep, raw
}

// The whole loop against a fake endpoint that replays recorded
// distributions made over-confident on purpose (sharpened by T = 0.5):
// bench -> report.json -> calibrate --from -> fits.json -> bench --fits on
// cases the fit never saw. The fit must find T near 2 and the calibrated
// numbers must beat the raw ones on the held-out cases.
func TestBenchCalibrateReplay(t *testing.T) {
	dir := t.TempDir()
	rec := recording{}
	fitCases, heldCases := filepath.Join(dir, "fit.jsonl"), filepath.Join(dir, "held.jsonl")
	const sharpenT = 0.5
	synthCases(t, fitCases, "fit", 300, 1, sharpenT, rec)
	synthCases(t, heldCases, "held", 300, 2, sharpenT, rec)
	rp := &replay{model: "replay-1.0", rec: rec,
		fail:      map[string]int{"synthetic case fit-choice-7": http.StatusServiceUnavailable},
		malformed: map[string]bool{"synthetic case fit-score-9": true}}
	srv := httptest.NewServer(rp)
	defer srv.Close()

	report, preds := filepath.Join(dir, "report.json"), filepath.Join(dir, "preds.jsonl")
	plot := filepath.Join(dir, "raw.png")
	stdout, stderr, err := cli(t, "bench", "--endpoint", srv.URL, "--model", "jev-latest", "--key-env", "REPLAY_KEY",
		"--concurrency", "8", "--out", report, "--save-predictions", preds, "--plot", plot, fitCases)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	t.Logf("bench, raw:\n%s", stdout)
	docs := []string{"## 1. bench: 900 cases, raw\n\n" + stdout}
	if stderr != "" {
		t.Errorf("stderr is not a terminal, yet: %q", stderr)
	}
	rep, raw := readReport(t, report)
	if rep.Overall.Cases != 900 || rep.Overall.Errors != 2 || rep.Overall.N != 898 || len(rep.Failures) != 2 || int(rp.asked.Load()) != 900 {
		t.Fatalf("cases %d errors %d n %d failures %d (first %+v) asked %d", rep.Overall.Cases, rep.Overall.Errors, rep.Overall.N, len(rep.Failures), rep.Failures[0], rp.asked.Load())
	}
	for _, f := range rep.Failures {
		if !strings.Contains(stdout, f.ID) {
			t.Errorf("failure %s is not listed on stdout", f.ID)
		}
	}
	if !strings.Contains(rep.Failures[0].Error+rep.Failures[1].Error, "status 503") || !strings.Contains(rep.Failures[0].Error+rep.Failures[1].Error, "malformed") {
		t.Errorf("failures %+v", rep.Failures)
	}
	checkReportShape(t, raw, false)
	if rep.Models[0] != "replay-1.0" || rep.Model != "jev-latest" || len(rep.Sets) != 3 {
		t.Fatalf("models %v model %s sets %d", rep.Models, rep.Model, len(rep.Sets))
	}
	if png, err := os.ReadFile(plot); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("plot: %v", err)
	}

	// Fit from the report: no request reaches the endpoint.
	fitsPath := filepath.Join(dir, "fits.json")
	asked := rp.asked.Load()
	stdout, stderr, err = cli(t, "calibrate", "--from", report, "--out", fitsPath, "--holdout", "0.2")
	if err != nil {
		t.Fatalf("calibrate: %v\n%s", err, stderr)
	}
	t.Logf("calibrate --from report:\n%s", stdout)
	docs = append(docs, "## 2. calibrate --from the report (20% of each bucket held out)\n\n"+strings.ReplaceAll(stdout, dir, "."))
	if rp.asked.Load() != asked {
		t.Fatal("calibrate --from asked the endpoint")
	}
	fits := readFits(t, fitsPath)
	if len(fits.Fits) != 3 {
		t.Fatalf("%d fits", len(fits.Fits))
	}
	for _, f := range fits.Fits {
		// 300 cases a kind, less the failed one of choice and score, 20% held out.
		if f.Model != "replay-1.0" || f.Provider != "" || f.Date == "" || f.N < 239 || f.N > 240 || f.Holdout == nil || f.Holdout.N+f.N < 299 {
			t.Errorf("fit %+v", f)
		}
		// The choice and noul replays are over-confident by exactly 1/0.5;
		// two-decimal rounding blurs it a little.
		if f.Kind != decision.Score && math.Abs(f.Temperature-1/sharpenT) > 0.15/sharpenT {
			t.Errorf("%s: fitted T %.3f; the replay sharpened by %.1f", f.Kind, f.Temperature, sharpenT)
		}
		if f.Holdout == nil || f.Holdout.NLLAfter >= f.Holdout.NLLBefore || f.Holdout.ECEAfter >= f.Holdout.ECEBefore {
			t.Errorf("%s: held out %+v: no better", f.Kind, f.Holdout)
		}
	}
	// The predictions file fits the same. Written over a file a reader
	// (a serve reloading its fits) holds open, the file is replaced whole:
	// the reader sees the old bytes, never the new written into them.
	fits2Path := filepath.Join(dir, "fits2.json")
	old := []byte(`{"version": 1, "fits": []}` + "\n")
	if err := os.WriteFile(fits2Path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(fits2Path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, stderr, err := cli(t, "calibrate", "--from", preds, "--out", fits2Path); err != nil {
		t.Fatalf("calibrate --from predictions: %v\n%s", err, stderr)
	}
	if got, err := io.ReadAll(held); err != nil || !bytes.Equal(got, old) {
		t.Errorf("a reader holding the old fits file read %d bytes of %q..., %v; want the old file whole", len(got), got[:min(len(got), 40)], err)
	}
	if st, err := os.Stat(fits2Path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("the fits file's mode: %v, %v; want 0644, as before", st.Mode().Perm(), err)
	}
	for i, f := range readFits(t, fits2Path).Fits {
		if f.Temperature != fits.Fits[i].Temperature || f.N != fits.Fits[i].N {
			t.Errorf("fit %d from the predictions file: %+v; from the report %+v", i, f, fits.Fits[i])
		}
	}

	// Bench again, with the fits, on cases the fit never saw.
	report2, plot2 := filepath.Join(dir, "report2.json"), filepath.Join(dir, "calibrated.png")
	stdout, stderr, err = cli(t, "bench", "--endpoint", srv.URL+"/v1/systemone", "--model", "jev-latest", "--fits", fitsPath,
		"--out", report2, "--plot", plot2, heldCases)
	if err != nil {
		t.Fatalf("bench --fits: %v\n%s", err, stderr)
	}
	t.Logf("bench --fits, unseen cases:\n%s", stdout)
	docs = append(docs, "## 3. bench --fits on 900 cases the fit never saw\n\n"+stdout)
	rep2, raw2 := readReport(t, report2)
	checkReportShape(t, raw2, true)
	for _, s := range append(rep2.Sets, rep2.Overall) {
		c := s.Calibrated
		if c == nil || *c.Fitted != s.N || c.N != s.N {
			t.Fatalf("%s: calibrated %+v", s.Name, c)
		}
		t.Logf("%-12s ECE %.4f -> %.4f   NLL %.4f -> %.4f   Brier %.4f -> %.4f", s.Name, s.ECE, c.ECE, s.NLL, c.NLL, s.Brier, c.Brier)
		if c.ECE >= s.ECE || c.NLL >= s.NLL {
			t.Errorf("%s: calibrated ECE %.4f NLL %.4f, raw ECE %.4f NLL %.4f: no better", s.Name, c.ECE, c.NLL, s.ECE, s.NLL)
		}
		// A temperature keeps the argmax, so choice and noul answers stay;
		// a score's answer, the rounded expected level, may move.
		if (s.Name == "synth-choice" || s.Name == "synth-noul") && c.Accuracy != s.Accuracy {
			t.Errorf("%s: temperature moved the argmax: accuracy %.4f -> %.4f", s.Name, s.Accuracy, c.Accuracy)
		}
	}
	if !strings.Contains(stdout, "calibrated (300/300 fitted)") {
		t.Errorf("no calibrated rows in the table:\n%s", stdout)
	}

	// bench/tiny.sh keeps this run as an example in docs/bench.
	if out := os.Getenv("SYSTEM1_BENCH_OUT"); out != "" {
		png, err := os.ReadFile(plot2)
		if err != nil {
			t.Fatal(err)
		}
		md := "# bench and calibrate against a replayed, over-confident endpoint\n\n" +
			"Generated by `SYSTEM1_BENCH_OUT=... go test ./cmd/system1 -run TestBenchCalibrateReplay` (bench/tiny.sh runs it).\n" +
			"A fake System One endpoint replays recorded distributions that are calibrated by construction (each case's\n" +
			"expected answer is drawn from its distribution), sharpened on purpose by T = 0.5 (p_i^2, renormalised): 300\n" +
			"choice (4 options), 300 noul and 300 score (5 levels) cases to fit on, 900 fresh ones to score on. One request\n" +
			"fails with a 503 and one reply is malformed (probabilities summing to 0.9): both are counted and listed.\n\n" +
			strings.Join(docs, "\n") + "\n![reliability diagram, raw and calibrated](replay.png)\n"
		if err := os.WriteFile(filepath.Join(out, "replay.md"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "replay.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkReportShape checks the JSON report's documented keys, which
// scripts rely on.
func checkReportShape(t *testing.T, raw map[string]any, calibrated bool) {
	t.Helper()
	var sums []map[string]any
	for _, s := range raw["sets"].([]any) {
		sums = append(sums, s.(map[string]any))
	}
	sums = append(sums, raw["overall"].(map[string]any))
	if calibrated {
		for _, s := range sums[:len(sums):len(sums)] {
			c, ok := s["calibrated"].(map[string]any)
			if !ok {
				t.Fatalf("%v: no calibrated numbers", s["name"])
			}
			sums = append(sums, c)
		}
	}
	for _, s := range sums {
		for _, k := range []string{"name", "n", "errors", "floor", "accuracy", "ece", "brier", "nll", "selective", "latency_ms", "throughput_rps"} {
			if _, ok := s[k]; !ok {
				t.Errorf("%v: no %q", s["name"], k)
			}
		}
		sel, _ := s["selective"].(map[string]any)
		for _, k := range []string{"0.7", "0.9"} {
			v, _ := sel[k].(map[string]any)
			if _, ok := v["accuracy"]; !ok {
				t.Errorf("%v: selective %s has no accuracy", s["name"], k)
			}
			if _, ok := v["coverage"]; !ok {
				t.Errorf("%v: selective %s has no coverage", s["name"], k)
			}
		}
		lat, _ := s["latency_ms"].(map[string]any)
		for _, k := range []string{"p50", "p95", "p99"} {
			if _, ok := lat[k]; !ok {
				t.Errorf("%v: latency_ms has no %s", s["name"], k)
			}
		}
	}
	cs, _ := raw["cases"].([]any)
	if len(cs) == 0 {
		t.Fatal("the report keeps no cases")
	}
}

func readFits(t *testing.T, path string) *calibration.Fits {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := calibration.ParseFits(data)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBenchCommandLine(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	synthCases(t, good, "g", 2, 1, 1, recording{})
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"id":"a","state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":true}}`+"\n"+
		`{"id":"b","state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":"yes"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", good}, "say what to ask"},
		{[]string{"bench", "--endpoint", "http://127.0.0.1:1"}, "no case files given"},
		{[]string{"bench", "--endpoint", "http://127.0.0.1:1", "--concurrency", "0", good}, "--concurrency must be at least 1"},
		{[]string{"bench", "--endpoint", "http://127.0.0.1:1", good}, "--model is required with --endpoint"},
		{[]string{"bench", "--endpoint", "http://127.0.0.1:1", "--model", "m", "--key-env", "NOT_SET", good}, "--key-env NOT_SET: the variable is empty or unset"},
		{[]string{"bench", "--endpoint", "http://127.0.0.1:1", "--model", "m", bad}, bad + `:2: case b: expected.q: "yes" is not true or false`},
		{[]string{"bench", "--endpoint", "http://127.0.0.1:1", "--model", "m", "--fits", bad, good}, bad + ": fits:"},
		{[]string{"calibrate", "--from", "r.json"}, "--out is required"},
		{[]string{"calibrate", "--from", "r.json", "--out", "f.json", "--holdout", "1"}, "--holdout must be in [0, 1)"},
		{[]string{"calibrate", "--from", "r.json", "--out", "f.json", good}, "--from fits a saved run"},
		{[]string{"calibrate", "--out", "f.json", good}, "say what to ask"},
		{[]string{"calibrate", "--from", bad, "--out", "f.json"}, bad + ": predictions line 1"},
	} {
		_, stderr, err := cli(t, tc.args...)
		if err == nil || !strings.Contains(err.Error()+stderr, tc.want) {
			t.Errorf("%v: err %v, stderr %q; want %q", tc.args, err, stderr, tc.want)
		}
	}
}

// Every request failing is an error, after the report that lists them.
func TestBenchEveryRequestFails(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.jsonl")
	synthCases(t, file, "c", 2, 1, 1, recording{})
	srv := httptest.NewServer(&replay{model: "m", rec: recording{}})
	defer srv.Close()
	out := filepath.Join(dir, "r.json")
	stdout, _, err := cli(t, "bench", "--endpoint", srv.URL, "--model", "m", "--out", out, file)
	if err == nil || !strings.Contains(err.Error(), "every one of the 6 requests failed") || !strings.Contains(err.Error(), "status 404") {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(stdout, "6 failed request(s)") {
		t.Errorf("stdout:\n%s", stdout)
	}
	rep, _ := readReport(t, out)
	if rep.Overall.Errors != 6 || len(rep.Failures) != 6 || rep.Overall.N != 0 {
		t.Errorf("%+v", rep.Overall)
	}
}

// calibrate refuses buckets with too few cases, says why on stderr and in
// its summary, and writes nothing when no bucket is left.
func TestCalibrateRefusesSmallBuckets(t *testing.T) {
	dir := t.TempDir()
	rec := recording{}
	small, big := filepath.Join(dir, "small.jsonl"), filepath.Join(dir, "big.jsonl")
	synthCases(t, small, "s", 10, 1, 0.5, rec)
	synthCases(t, big, "b", 60, 2, 0.5, rec)
	srv := httptest.NewServer(&replay{model: "m-1", rec: rec})
	defer srv.Close()
	// The cases are asked first (calibrate --endpoint): 70 of each kind;
	// the noul cases come from the small file only.
	noulOnly := filepath.Join(dir, "noul.jsonl")
	data, _ := os.ReadFile(small)
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(l, `"type":"noul"`) {
			lines = append(lines, l)
		}
	}
	data, _ = os.ReadFile(big)
	for l := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if !strings.Contains(l, `"type":"noul"`) {
			lines = append(lines, l)
		}
	}
	if err := os.WriteFile(noulOnly, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fitsPath, report := filepath.Join(dir, "fits.json"), filepath.Join(dir, "report.json")
	stdout, stderr, err := cli(t, "calibrate", "--endpoint", srv.URL, "--model", "alias", "--bench-report", report, "--out", fitsPath, noulOnly)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Logf("calibrate --endpoint:\n%s", stdout)
	if !strings.Contains(stderr, "not fitting noul, bucket 2, of model m-1: 8 cases to fit on (10 in the bucket, 2 held out); at least 30 are needed (--min-cases)") {
		t.Errorf("stderr %q", stderr)
	}
	if !strings.Contains(stdout, "| – | m-1 | noul | 2 | 8 | 2 | refused | 8 cases to fit on") || !strings.Contains(stdout, "wrote 2 fit(s)") {
		t.Errorf("stdout:\n%s", stdout)
	}
	fits := readFits(t, fitsPath)
	if len(fits.Fits) != 2 || fits.Fits[0].Model != "m-1" || fits.Fits[0].Kind != decision.Choice || fits.Fits[1].Kind != decision.Score {
		t.Errorf("%+v", fits.Fits)
	}
	if rep, _ := readReport(t, report); rep.Overall.Cases != 130 {
		t.Errorf("report of %d cases", rep.Overall.Cases)
	}

	os.Remove(fitsPath)
	_, stderr, err = cli(t, "calibrate", "--from", report, "--out", fitsPath, "--min-cases", "1000")
	if err == nil || !strings.Contains(err.Error(), "no bucket could be fitted") || strings.Count(stderr, "at least 1000 are needed") != 3 {
		t.Errorf("err %v stderr %q", err, stderr)
	}
	if _, err := os.Stat(fitsPath); !os.IsNotExist(err) {
		t.Error("a fits file was written with no fit in it")
	}
}

// bench and calibrate through a provider of the configuration's chain:
// a systemone provider (the replay) and an engine provider (a fake
// llama.cpp node through system1's own router).
func TestBenchProvider(t *testing.T) {
	dir := t.TempDir()
	rec := recording{}
	file := filepath.Join(dir, "c.jsonl")
	synthCases(t, file, "p", 40, 3, 0.5, rec)
	srv := httptest.NewServer(&replay{model: "replay-2", rec: rec})
	defer srv.Close()
	eng := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	defer eng.Close()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`nodes:
  - name: local
    url: %s
    dialect: llamacpp
providers:
  - name: hosted
    kind: systemone
    url: %s
    model: jev-latest
    key_env: REPLAY_KEY
  - name: engine
    kind: engine
    model: %s
`, eng.URL, srv.URL, fakeengine.DefaultModel)), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "r.json")
	stdout, stderr, err := cli(t, "bench", "--config", cfg, "--provider", "hosted", "--out", report, file)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "against provider hosted ("+srv.URL+"), model jev-latest (replies name replay-2)") {
		t.Errorf("stdout:\n%s", stdout)
	}
	rep, _ := readReport(t, report)
	if rep.Provider != "hosted" || rep.Config != cfg || rep.Overall.Errors != 0 || rep.Cases[0].Provider != "hosted" {
		t.Fatalf("provider %q config %q errors %d", rep.Provider, rep.Config, rep.Overall.Errors)
	}
	fitsPath := filepath.Join(dir, "fits.json")
	if _, stderr, err := cli(t, "calibrate", "--from", report, "--out", fitsPath, "--holdout", "0"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	fits := readFits(t, fitsPath)
	if len(fits.Fits) != 3 || fits.Fits[0].Provider != "hosted" || fits.Fits[0].Model != "replay-2" {
		t.Fatalf("%+v", fits.Fits)
	}
	// The fits are found by provider: bench --fits through the same
	// provider is calibrated.
	stdout, stderr, err = cli(t, "bench", "--config", cfg, "--provider", "hosted", "--fits", fitsPath, file)
	if err != nil || !strings.Contains(stdout, "calibrated (40/40 fitted)") {
		t.Fatalf("%v\n%s\n%s", err, stderr, stdout)
	}

	// The engine provider: system1's router over the fake node (its
	// default distribution halves from label to label).
	stdout, stderr, err = cli(t, "bench", "--config", cfg, "--provider", "engine", "--out", report, file)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rep, _ = readReport(t, report)
	if rep.Overall.Errors != 0 || rep.Models[0] != fakeengine.DefaultModel || rep.Cases[0].Provider != "engine" {
		t.Fatalf("%+v\n%s", rep.Overall, stdout)
	}
	if d := rep.Cases[0].Questions[0].Dist; len(d) != 4 || math.Abs(d[0]-8.0/15) > 1e-9 {
		t.Errorf("engine distribution %v, want the fake's halving 8/15, 4/15, 2/15, 1/15", d)
	}

	if _, _, err := cli(t, "bench", "--config", cfg, "--provider", "nope", file); err == nil || !strings.Contains(err.Error(), `no provider "nope"`) || !strings.Contains(err.Error(), "hosted, engine") {
		t.Errorf("err %v", err)
	}
}

func TestServingFits(t *testing.T) {
	dir := t.TempDir()
	log := logger(env{getenv: func(string) string { return "" }, stderr: io.Discard})
	cfg := &config.Config{Path: filepath.Join(dir, "config.yaml")}
	if f, err := servingFits(cfg, log); f != nil || err != nil {
		t.Fatalf("calibration off: %v %v", f, err)
	}
	// Refits with the log off: the log is named, where serve said the
	// refits need mode: apply.
	cfg.Calibration.RefitEvery, cfg.DecisionLog.Off = config.Duration(time.Minute), true
	if _, err := servingFits(cfg, log); err == nil || !strings.Contains(err.Error(), "the decision log is off") {
		t.Fatalf("refits with the log off: %v", err)
	}
	cfg.Calibration.RefitEvery, cfg.DecisionLog.Off = 0, false
	cfg.Calibration.Mode = "apply"
	if _, err := servingFits(cfg, log); err == nil || !strings.Contains(err.Error(), "set gateway.fits") {
		t.Fatalf("err %v", err)
	}
	cfg.Gateway.Fits = "fits.json"
	if _, err := servingFits(cfg, log); err == nil {
		t.Fatal("a missing fits file was accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, "fits.json"), []byte(`{"version":1,"created":"","fits":[{"provider":"","model":"m","kind":"noul","bucket":"2","temperature":1.5,"n":40,"nll_before":0,"nll_after":0,"ece_before":0,"ece_after":0,"date":""}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := servingFits(cfg, log)
	if err != nil || len(f.Current().Fits) != 1 {
		t.Fatalf("%v %v", f, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fits.json"), []byte(`{"version":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := servingFits(cfg, log); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("err %v", err)
	}
}

func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	bar := &progressBar{w: &b}
	bar.update(bench.Progress{Done: 1, Total: 4, Errors: 0, Elapsed: 1e9})
	bar.update(bench.Progress{Done: 2, Total: 4, Errors: 1, Elapsed: 1e9}) // within 100 ms of the last: not drawn
	bar.update(bench.Progress{Done: 4, Total: 4, Errors: 1, Elapsed: 2e9}) // the last is always drawn
	bar.finish()
	want := "\r[#######.......................] 1/4  errors 0  1.0 req/s " +
		"\r[##############################] 4/4  errors 1  2.0 req/s " +
		"\r[##############################] 4/4  errors 1  2.0 req/s \n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
	if isTerminal(&b) || isTerminal(io.Discard) {
		t.Error("a buffer is not a terminal")
	}
}

// An interrupted run still writes its report, counting the cases not
// sent as failed, and says it was interrupted.
func TestBenchInterrupted(t *testing.T) {
	dir := t.TempDir()
	file, out := filepath.Join(dir, "c.jsonl"), filepath.Join(dir, "r.json")
	synthCases(t, file, "c", 2, 1, 1, recording{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"bench", "--endpoint", "http://127.0.0.1:1", "--model", "m", "--out", out, file},
		func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("err %v", err)
	}
	rep, _ := readReport(t, out)
	if rep.Overall.Errors != 6 || !strings.Contains(rep.Failures[0].Error, "not sent") {
		t.Errorf("%+v %+v", rep.Overall, rep.Failures)
	}
}
