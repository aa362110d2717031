package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// feedback's synopsis as docs/decision-log.md gives it runs as written,
// and a flag given after REQUEST_ID OUTCOME is a usage error that says
// where flags go, not the whole help with nothing to say what was wrong.
func TestFeedbackFlagAfterItsArguments(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("decision_log: {off: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/decision-log.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "`system1 feedback [--question Q] REQUEST_ID OUTCOME`"; !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), want) {
		t.Errorf("docs/decision-log.md does not give feedback's synopsis as %s", want)
	}
	for _, args := range [][]string{
		{"req_1", "yes", "--question", "q"},
		{"req_1", "yes", "--config=" + cfg},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, stderr, err := cli(t, append([]string{"feedback", "--state-dir", dir}, args...)...)
			if !errors.Is(err, errUsage) || !strings.Contains(stderr, args[2]) || !strings.Contains(stderr, "flags go before REQUEST_ID OUTCOME") {
				t.Fatalf("err %v, stderr %q", err, stderr)
			}
		})
	}
	// In the order the synopsis gives, the command line is understood:
	// the log is off, so nothing is recorded (exit 1, not 2).
	if _, stderr, err := cli(t, "feedback", "--config", cfg, "--state-dir", dir, "--question", "q", "req_1", "yes"); errors.Is(err, errUsage) {
		t.Errorf("a usage error: %s", stderr)
	}
}

// A --file body over the limit, from stdin or a file alike, is not
// recorded (exit 4) with a result saying it is too large, where stdin was
// cut at the limit without a word and read as invalid JSON, and a file
// was read whole however large.
func TestFeedbackFileOverTheLimit(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("decision_log: {off: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Valid JSON: white space up to the limit, then one outcome.
	body := strings.Repeat(" ", maxInput) + `{"request_id":"req_1","outcome":"yes"}`
	path := filepath.Join(dir, "big.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		stdin      string
	}{{"stdin", "-", body}, {"a file", path, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{"feedback", "--config", cfg, "--state-dir", dir, "--file", tc.file},
				func(string) string { return "" }, strings.NewReader(tc.stdin), &out, &errb)
			if !errors.Is(err, errNotRecorded) || !strings.Contains(out.String(), "over the limit of 16 MiB") {
				t.Errorf("err %v, want not recorded (exit 4) saying the body is over 16 MiB\n%s%s", err, out.String(), errb.String())
			}
		})
	}
}
