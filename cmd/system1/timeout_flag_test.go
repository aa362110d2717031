package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// bench's, calibrate's and check's --timeout bounds each request: 0 or
// less is a usage error (exit 2) naming it, where it left every request
// unbounded and a hung endpoint held the run for ever.
func TestTimeoutFlagIsABound(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cases := filepath.Join(dir, "cases.jsonl")
	cfg := filepath.Join(dir, "config.yaml")
	for file, data := range map[string]string{
		cases: `{"id":"c1","set":"s","state":"x","questions":{"u":{"type":"noul"}},"expected":{"u":true}}` + "\n",
		cfg:   "nodes:\n  - {name: n, url: " + srv.URL + ", dialect: llamacpp, models: [m]}\n",
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, timeout := range []string{"0", "-1s"} {
		for _, args := range [][]string{
			{"bench", "--endpoint", srv.URL, "--model", "m", "--timeout", timeout, cases},
			{"calibrate", "--endpoint", srv.URL, "--model", "m", "--out", filepath.Join(dir, "fits.json"), "--timeout", timeout, cases},
			{"check", "--config", cfg, "--model", "m", "--cases", cases, "--baseline", filepath.Join(dir, "baseline.json"), "--write-baseline", "--timeout", timeout},
		} {
			t.Run(args[0]+" --timeout "+timeout, func(t *testing.T) {
				asked.Store(0)
				_, stderr, err := cli(t, args...)
				if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--timeout") || asked.Load() != 0 {
					t.Fatalf("err %v, stderr %q, %d requests; want a usage error naming --timeout, nothing asked", err, stderr, asked.Load())
				}
			})
		}
	}
}
