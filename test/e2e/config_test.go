package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"system1/internal/testbin"
)

// serve started on a configuration of 500,000 aliases stops at SIGTERM
// while it reads it (loading was quadratic in the aliases: this file
// took hours, and the signal waited for it), exiting 0.
func TestServeStopsWhileReadingALargeConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "system1.yaml")
	var b strings.Builder
	b.WriteString("nodes:\n  - {name: a, url: 'http://127.0.0.1:9', dialect: llamacpp, models: [m]}\naliases:\n")
	for i := range 500_000 {
		fmt.Fprintf(&b, "  alias-%d: m\n", i)
	}
	writeFile(t, path, b.String())
	cmd := exec.Command(testbin.Binary(t), "serve", "--config", path, "--listen", "127.0.0.1:0")
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "SYSTEM1_LOG_LEVEL=debug")
	s := &server{t: t, cmd: cmd, log: &logBuffer{changed: make(chan struct{})}, exited: make(chan struct{})}
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("system1 serve log:\n%s", s.log.String())
		}
	})
	s.waitLog(t, regexp.MustCompile(`msg="reading the configuration"`), 1, 30*time.Second)
	s.signal(t, syscall.SIGTERM)
	// A bound on a hang, not a timing: the fixed load takes about a second.
	if code := s.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGTERM; want 0", code)
	}
	if !strings.Contains(s.log.String(), "stopped by a signal while reading the configuration") {
		t.Logf("the signal came after the configuration was read")
	}
}

// serve refuses to start with no nodes, saying so; the old form's
// systemone providers are nodes, so with one it starts and routes to it.
func TestServeWithoutNodes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "system1.yaml")
	writeFile(t, path, "nodes: []\n")
	// A serve that starts anyway is killed after a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Binary(t), "serve", "--config", path, "--listen", "127.0.0.1:0")
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "nodes: none configured") {
		t.Errorf("serve with nodes: [] %v:\n%s", err, out)
	}
	s := startServe(t, "nodes: []\nproviders:\n  - {name: jev, kind: systemone, url: 'http://127.0.0.1:9', model: jev}\n", serveOpts{})
	if !strings.Contains(s.log.String(), "nodes=1") {
		t.Errorf("the systemone provider is not a node:\n%s", s.log.String())
	}
}

// decision_log.url_env names the variable holding the PostgreSQL URL:
// serve refuses to start when it is empty or holds no postgres:// URL,
// naming the key and the variable but never the URL, rather than record
// in an SQLite file of this replica's own.
func TestServeChecksTheDecisionLogURLVariable(t *testing.T) {
	for _, c := range []struct {
		value, want string
	}{
		{"", "decision_log.url_env: $SYSTEM1_DECISION_LOG_URL is not set or empty"},
		{"http://user:s3cret@db/x", "decision_log.url_env: the URL in $SYSTEM1_DECISION_LOG_URL the scheme must be postgres://"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "system1.yaml")
		writeFile(t, path, "nodes: [{name: a, url: 'http://127.0.0.1:9', dialect: llamacpp}]\ndecision_log: {url_env: SYSTEM1_DECISION_LOG_URL}\n")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a serve that starts anyway
		cmd := exec.CommandContext(ctx, testbin.Binary(t), "serve", "--config", path, "--listen", "127.0.0.1:0", "--state-dir", dir)
		cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "SYSTEM1_DECISION_LOG_URL="+c.value)
		out, err := cmd.CombinedOutput()
		cancel()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("url_env holding %q: %v:\n%s", c.value, err, out)
		}
		if strings.Contains(string(out), "s3cret") {
			t.Errorf("the error repeats the URL's password:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(dir, "decisions.db")); err == nil {
			t.Errorf("url_env holding %q: serve wrote an SQLite log of its own", c.value)
		}
	}
}
