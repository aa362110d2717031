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

// The System One endpoint a command line names (run --url, bench and
// calibrate --endpoint) is an http(s) base URL, checked before anything is
// asked: one with a query or a fragment, which would swallow the
// /v1/systemone added to it (http://h?x=1 asked POST /?x=1/v1/systemone),
// or with no scheme, is a usage error (exit 2) naming the flag.
func TestEndpointURLIsABaseURL(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	dir := t.TempDir()
	q := filepath.Join(dir, "q.json")
	rows := filepath.Join(dir, "rows.jsonl")
	cases := filepath.Join(dir, "cases.jsonl")
	for file, data := range map[string]string{
		q:     `{"model": "m", "questions": {"urgent": {"type": "noul"}}}`,
		rows:  `{"id": 1, "state": "x"}` + "\n",
		cases: `{"id":"c1","set":"s","state":"x","questions":{"u":{"type":"noul"}},"expected":{"u":true}}` + "\n",
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	commands := []struct {
		flag string
		args func(url string) []string
	}{
		{"--url", func(url string) []string {
			return []string{"run", "--questions", q, "--in", rows, "--out", filepath.Join(t.TempDir(), "answers.jsonl"), "--url", url}
		}},
		{"--endpoint", func(url string) []string {
			return []string{"bench", "--endpoint", url, "--model", "m", cases}
		}},
		{"--endpoint", func(url string) []string {
			return []string{"calibrate", "--endpoint", url, "--model", "m", "--out", filepath.Join(t.TempDir(), "fits.json"), cases}
		}},
	}
	for _, c := range commands {
		for _, tc := range []struct{ url, says string }{
			{srv.URL + "?x=1", "has a query"},
			{srv.URL + "/prefix?", "has a query"},
			{srv.URL + "/#frag", "has a fragment"},
			{strings.TrimPrefix(srv.URL, "http://"), "is not an http(s) URL"},
		} {
			args := c.args(tc.url)
			t.Run(args[0]+" "+tc.url, func(t *testing.T) {
				asked.Store(0)
				_, stderr, err := cli(t, args...)
				if !errors.Is(err, errUsage) || !strings.Contains(stderr, c.flag) || !strings.Contains(stderr, tc.says) || asked.Load() != 0 {
					t.Fatalf("err %v, stderr %q, %d requests; want a usage error naming %s and saying %q, nothing asked", err, stderr, asked.Load(), c.flag, tc.says)
				}
			})
		}
	}
}
