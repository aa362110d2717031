package main

import (
	"bytes"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/testengine"
)

// realServe runs system1's HTTP face over a real llama-server, with the
// given calibration options.
func realServe(t *testing.T, engineURL string, fits *calibration.Fits) string {
	t.Helper()
	n, err := fleet.NewNode(config.Node{Name: "tiny", URL: engineURL, Dialect: "llamacpp", Models: []string{testengine.Model}},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	ao := answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{})}
	if fits != nil {
		ao.Fits = func() *calibration.Fits { return fits }
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(ao), Rounding: 2}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A bench through our own /v1/systemone over the real llama-server with
// the shared tiny model, on AG News; then a fit from its report, and the
// server applying that fit. The tiny model's accuracy is near chance: the
// point is that the whole path works. bench/tiny.sh makes the same run,
// larger, through the built binary, for docs/bench.
func TestBenchRealEngine(t *testing.T) {
	cases := testengine.SharedData(t, "agnews-dev.jsonl")
	engine := testengine.Start(t, 4)
	url := realServe(t, engine.URL, nil)
	dir := t.TempDir()
	report, plot := filepath.Join(dir, "report.json"), filepath.Join(dir, "tiny.png")
	stdout, stderr, err := cli(t, "bench", "--endpoint", url, "--model", testengine.Model, "--limit", "40",
		"--concurrency", "4", "--out", report, "--plot", plot, cases)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Logf("real engine:\n%s", stdout)
	rep, _ := readReport(t, report)
	o := rep.Overall
	if o.Cases != 40 || o.N != 40 || o.Errors != 0 || len(rep.Models) != 1 || o.LatencyMS.P50 <= 0 || o.ThroughputRPS <= 0 {
		t.Fatalf("%+v models %v", o, rep.Models)
	}
	if o.Floor <= 0 || o.Accuracy < 0 || o.Accuracy > 1 || o.NLL <= 0 {
		t.Errorf("%+v", o)
	}
	data, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}

	fitsPath := filepath.Join(dir, "fits.json")
	stdout, stderr, err = cli(t, "calibrate", "--from", report, "--out", fitsPath, "--min-cases", "10", "--holdout", "0.25")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Logf("calibrate:\n%s", stdout)
	fits := readFits(t, fitsPath)
	if len(fits.Fits) != 1 || fits.Fits[0].Model != rep.Models[0] || fits.Fits[0].Bucket != "3-4" {
		t.Fatalf("%+v", fits.Fits)
	}

	// The server with calibration: apply says so on every answer.
	calURL := realServe(t, engine.URL, fits)
	body := `{"model":"` + testengine.Model + `","state":"Stocks fell sharply on Wall Street.","questions":{"topic":{"type":"choice",` +
		`"criteria":{"world":"world news","sports":"sports","business":"business","scitech":"science and technology"}}}}`
	for _, u := range []string{url, calURL} {
		resp, err := http.Post(u+"/v1/systemone", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got, want := resp.Header.Get("X-System1-Calibrated"), ""
		if u == calURL {
			want = "true"
		}
		if resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("%s: status %d, x-system1-calibrated %q, want %q", u, resp.StatusCode, got, want)
		}
	}
}
