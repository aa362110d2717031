package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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
		{[]string{"--url", "http://127.0.0.1:1", "--state-dir", "/tmp/state"}, "--state-dir"},
		{[]string{"--url", "http://127.0.0.1:1", "--concurrency", "1000"}, "--concurrency"},
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

// run reads its input twice, so a pipe (cat rows | system1 run --in
// /dev/stdin) is refused before anything runs, with why, as docs/run.md
// says the input must be a file; never counted on the first pass and
// found empty on the second, a run that "ended early" and says to run it
// again, which can never resume it.
func TestRunInputIsAPipe(t *testing.T) {
	dir := t.TempDir()
	q := filepath.Join(dir, "q.json")
	if err := os.WriteFile(q, []byte(`{"model": "m", "questions": {"urgent": {"type": "noul"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString(`{"id": 1, "state": "x"}` + "\n" + `{"id": 2, "state": "y"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	in := fmt.Sprintf("/proc/self/fd/%d", r.Fd())
	if _, err := os.Stat(in); err != nil {
		t.Skipf("no %s here: %v", in, err)
	}
	out := filepath.Join(dir, "answers.jsonl")
	stdout, stderr, err := cli(t, "run", "--url", "http://127.0.0.1:1", "--questions", q, "--in", in, "--out", out)
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), in) || !strings.Contains(err.Error(), "not a pipe") {
		t.Fatalf("err %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
	if strings.Contains(err.Error(), "resume") || strings.Contains(stdout, "rows") {
		t.Errorf("says to resume, or a summary of rows never asked: err %v\nstdout %q", err, stdout)
	}
}

// run's command lines in the README and docs/run.md run as copied with
// the questions file docs/run.md shows, a Jev questions map that names no
// model: each gives --model. Without it and without a model in the file,
// run says --model is needed, as the usage error it is (exit 2).
func TestRunModelAsTheDocsGiveIt(t *testing.T) {
	for _, doc := range []string{"../../README.md", "../../docs/run.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if (strings.HasPrefix(line, "system1 run --") || strings.HasPrefix(line, "bin/system1 run --")) && !strings.Contains(line, "--model") {
				t.Errorf("%s: no --model, which the questions map it reads does not name:\n%s", doc, line)
			}
		}
	}
	dir := t.TempDir()
	q := filepath.Join(dir, "questions.json")
	in := filepath.Join(dir, "rows.jsonl")
	for file, data := range map[string]string{
		q:  `{"dept": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "money", "tech": "bugs"}}}`,
		in: `{"id": 1, "state": "x"}` + "\n",
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, err := cli(t, "run", "--url", "http://127.0.0.1:1", "--questions", q, "--in", in, "--out", filepath.Join(dir, "answers.jsonl"))
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--model") {
		t.Errorf("err %v, stderr %q", err, stderr)
	}
}

// A key that a header cannot carry (a key file's CR or newline kept in
// the variable) is refused before anything runs, naming --key-env and the
// variable, on every command that asks an endpoint: never sent, failed
// as a connection and retried for seconds, ending in a run that says to
// run it again (or a bench whose every request failed).
func TestKeyAHeaderCannotCarry(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	defer srv.Close()
	dir := t.TempDir()
	q, in, cases := filepath.Join(dir, "q.json"), filepath.Join(dir, "rows.jsonl"), filepath.Join(dir, "cases.jsonl")
	for file, data := range map[string]string{
		q:     `{"model": "m", "questions": {"urgent": {"type": "noul"}}}`,
		in:    `{"id": 1, "state": "x"}` + "\n",
		cases: `{"id":"c1","set":"s","state":"x","questions":{"u":{"type":"noul"}},"expected":{"u":true}}` + "\n",
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	for _, args := range [][]string{
		{"run", "--url", srv.URL, "--key-env", "THE_KEY", "--questions", q, "--in", in, "--out", out},
		{"bench", "--endpoint", srv.URL, "--model", "m", "--key-env", "THE_KEY", "--out", out, cases},
		{"calibrate", "--endpoint", srv.URL, "--model", "m", "--key-env", "THE_KEY", "--out", out, cases},
		{"shadow", "--report", "--url", srv.URL, "--key-env", "THE_KEY"},
	} {
		for _, key := range []string{"sk-abc\r", "sk-abc\n", " sk-abc", "sk-\x00abc"} {
			asked.Store(0)
			var stdout, stderr bytes.Buffer
			start := time.Now()
			err := run(context.Background(), args, func(k string) string {
				if k == "THE_KEY" {
					return key
				}
				return ""
			}, strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "--key-env") || !strings.Contains(err.Error(), "THE_KEY") || asked.Load() != 0 {
				t.Errorf("%s, key %q: after %v: err %v, %d requests", args[0], key, time.Since(start).Round(time.Millisecond), err, asked.Load())
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s, key %q: --out was made: %v", args[0], key, err)
			}
		}
	}
}
