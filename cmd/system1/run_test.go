package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run's flags are checked before anything is read or asked: a bad one is
// a usage error (exit 2, docs/run.md) naming the flag, never a run that
// retries an address that cannot be one and then says to run it again,
// nor a value dropped for the default.
func TestRunBadFlags(t *testing.T) {
	dir := t.TempDir()
	q := filepath.Join(dir, "q.json")
	in := filepath.Join(dir, "rows.jsonl")
	for file, data := range map[string]string{
		q:  `{"model": "m", "questions": {"urgent": {"type": "noul"}}}`,
		in: `{"id": 1, "state": "x"}` + "\n",
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		flags []string
		names string
	}{
		{[]string{"--url", "localhost:3000"}, "--url"},
		{[]string{"--url", "127.0.0.1:3000"}, "--url"},
		{[]string{"--url", "ftp://127.0.0.1:3000"}, "--url"},
		{[]string{"--url", "http://"}, "--url"},
		{[]string{"--url", "http://127.0.0.1:1", "--format", "xml"}, "--format"},
		{[]string{"--url", "http://127.0.0.1:1", "--concurrency", "-3"}, "--concurrency"},
	} {
		t.Run(strings.Join(c.flags, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "answers.jsonl")
			start := time.Now()
			_, stderr, err := cli(t, append([]string{"run", "--questions", q, "--in", in, "--out", out}, c.flags...)...)
			if !errors.Is(err, errUsage) || !strings.Contains(stderr, c.names) {
				t.Fatalf("after %v: err %v, stderr %q", time.Since(start).Round(time.Millisecond), err, stderr)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--out was made: %v", err)
			}
		})
	}
}
