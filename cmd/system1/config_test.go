package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// decide names the file scripts/run.sh writes as a place it looked only
// when it did look there: the configuration was not named (no --config,
// no $SYSTEM1_CONFIG). A file named and missing is that file alone, even
// when run.sh's file is there and would answer.
func TestDecideMissingConfigNamesWhereItLooked(t *testing.T) {
	home := t.TempDir()
	runCfg := filepath.Join(home, ".cache", "system1", "run", "config-3000.yaml")
	missing := filepath.Join(t.TempDir(), "typo.yaml")
	for _, c := range []struct {
		name    string
		written bool // run.sh's file is there
		env     map[string]string
		args    []string
		nor     bool // the message says run.sh's file was looked at too
	}{
		{"nothing named, no run.sh file", false, nil, nil, true},
		{"--config named, run.sh file there", true, nil, []string{"--config", missing}, false},
		{"--config named, no run.sh file", false, nil, []string{"--config", missing}, false},
		{"$SYSTEM1_CONFIG named, run.sh file there", true, map[string]string{"SYSTEM1_CONFIG": missing}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(filepath.Dir(runCfg))
			if c.written {
				if err := os.MkdirAll(filepath.Dir(runCfg), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(runCfg, []byte("decision_log: {off: true}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{"HOME": home, "XDG_STATE_HOME": filepath.Join(home, "state")}
			for k, v := range c.env {
				env[k] = v
			}
			args := append(append([]string{"decide"}, c.args...), "Ship it?")
			_, stderr, err := cliEnv(t, env, args...)
			if !errors.Is(err, errReported) || !strings.Contains(stderr, "config_error") {
				t.Fatalf("err %v, stderr:\n%s", err, stderr)
			}
			if got := strings.Contains(stderr, "nor at "+runCfg); got != c.nor {
				t.Errorf("says it looked at %s too: %v, want %v:\n%s", runCfg, got, c.nor, stderr)
			}
		})
	}
}
