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

// Command lines that cannot mean what they say are usage errors (exit 2)
// that name the flag, checked before anything is asked or written:
//   - an endpoint (run --url, bench and calibrate --endpoint) with a query
//     or fragment, which would swallow the /v1/systemone added to it
//     (http://h?x=1 asked POST /?x=1/v1/systemone), or with no scheme;
//   - a --timeout of 0 or less on bench, calibrate and check, which left
//     every request unbounded and a hung endpoint held the run for ever;
//   - a flag after bench's or calibrate's case files, where bench opened
//     "--out" as a case file and calibrate said --out is required.
func TestUsageErrorsAskNothing(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	dir := t.TempDir()
	q, rows, cases, cfg := filepath.Join(dir, "q.json"), filepath.Join(dir, "rows.jsonl"), filepath.Join(dir, "cases.jsonl"), filepath.Join(dir, "config.yaml")
	for file, data := range map[string]string{
		q:     `{"model": "m", "questions": {"urgent": {"type": "noul"}}}`,
		rows:  `{"id": 1, "state": "x"}` + "\n",
		cases: `{"id":"c1","set":"s","state":"x","questions":{"u":{"type":"noul"}},"expected":{"u":true}}` + "\n",
		cfg:   "nodes:\n  - {name: n, url: " + srv.URL + ", dialect: llamacpp, models: [m]}\n",
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out.json")
	type usage struct {
		args []string
		says []string // each in stderr
	}
	var lines []usage
	for _, u := range []struct{ url, says string }{
		{srv.URL + "?x=1", "has a query"},
		{srv.URL + "/prefix?", "has a query"},
		{srv.URL + "/#frag", "has a fragment"},
		{strings.TrimPrefix(srv.URL, "http://"), "is not an http(s) URL"},
	} {
		lines = append(lines,
			usage{[]string{"run", "--questions", q, "--in", rows, "--out", out, "--url", u.url}, []string{"--url", u.says}},
			usage{[]string{"bench", "--endpoint", u.url, "--model", "m", cases}, []string{"--endpoint", u.says}},
			usage{[]string{"calibrate", "--endpoint", u.url, "--model", "m", "--out", out, cases}, []string{"--endpoint", u.says}})
	}
	for _, timeout := range []string{"0", "-1s"} {
		lines = append(lines,
			usage{[]string{"bench", "--endpoint", srv.URL, "--model", "m", "--timeout", timeout, cases}, []string{"--timeout"}},
			usage{[]string{"calibrate", "--endpoint", srv.URL, "--model", "m", "--out", out, "--timeout", timeout, cases}, []string{"--timeout"}},
			usage{[]string{"check", "--config", cfg, "--model", "m", "--cases", cases, "--baseline", out, "--write-baseline", "--timeout", timeout}, []string{"--timeout"}})
	}
	lines = append(lines,
		usage{[]string{"bench", "--endpoint", srv.URL, "--model", "m", cases, "--out", out}, []string{"--out: flags go before the case files"}},
		usage{[]string{"bench", "--endpoint", srv.URL, "--model", "m", cases, "--limit=1"}, []string{"--limit=1: flags go before the case files"}},
		usage{[]string{"calibrate", "--endpoint", srv.URL, "--model", "m", cases, "--out", out}, []string{"--out: flags go before the case files"}},
		usage{[]string{"calibrate", "--endpoint", srv.URL, "--model", "m", "--out", out, cases, "-holdout", "0.5"}, []string{"-holdout: flags go before the case files"}})
	for _, u := range lines {
		t.Run(strings.Join(u.args, " "), func(t *testing.T) {
			asked.Store(0)
			_, stderr, err := cli(t, u.args...)
			if !errors.Is(err, errUsage) || asked.Load() != 0 {
				t.Fatalf("err %v, stderr %q, %d requests; want a usage error, nothing asked", err, stderr, asked.Load())
			}
			for _, s := range u.says {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q does not say %q", stderr, s)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was written: %v", out, err)
			}
		})
	}
}
