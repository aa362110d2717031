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

// bench and calibrate read their flags before the case files, as their
// usage says: a flag after a case file is a usage error (exit 2) saying
// flags go first, where bench tried to open "--out" as a case file (exit
// 1) and calibrate said --out is required, which the caller had given.
func TestBenchFlagsAfterTheCaseFiles(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cases := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(cases, []byte(`{"id":"c1","set":"s","state":"x","questions":{"u":{"type":"noul"}},"expected":{"u":true}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.json")
	for _, args := range [][]string{
		{"bench", "--endpoint", srv.URL, "--model", "m", cases, "--out", out},
		{"bench", "--endpoint", srv.URL, "--model", "m", cases, "--limit=1"},
		{"calibrate", "--endpoint", srv.URL, "--model", "m", cases, "--out", out},
		{"calibrate", "--endpoint", srv.URL, "--model", "m", "--out", out, cases, "-holdout", "0.5"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			asked.Store(0)
			_, stderr, err := cli(t, args...)
			flag := args[len(args)-2]
			if strings.HasPrefix(args[len(args)-1], "-") {
				flag = args[len(args)-1]
			}
			if !errors.Is(err, errUsage) || !strings.Contains(stderr, flag+": flags go before the case files") || asked.Load() != 0 {
				t.Fatalf("err %v, stderr %q, %d requests; want a usage error naming %s and saying flags go first, nothing asked", err, stderr, asked.Load(), flag)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was written: %v", out, err)
			}
		})
	}
}
