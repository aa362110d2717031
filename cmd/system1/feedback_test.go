package main

import (
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
