package main

import (
	"os/exec"
	"testing"
)

// shellQuote's words read back as they were in a POSIX shell, so that
// the feedback command decide prints runs as copied whatever the path.
func TestShellQuote(t *testing.T) {
	for _, s := range []string{"/tmp/config.yaml", "/tmp/my dir/c.yaml", "it's", `a"b`, "$HOME", "req_0123", "", "a\\b", "x;rm -rf y", "~/c.yaml"} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) = %s: the shell read %q (%v)", s, shellQuote(s), out, err)
		}
	}
}
