package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// system1 serve does not start with a key that a blank token would match
// or no caller could present, from the file or from keys_env: it exits
// with an error naming the key, before it listens.
func TestServeRefusesBlankKeys(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, env, want string
	}{
		{"an empty key in the file", `keys: ["real", ""]`, "", "keys[1]"},
		{"a key of spaces in the file", `keys: ["   "]`, "", "keys[0]"},
		{"a key of U+00A0 in the file", "keys: [\"\u00a0\"]", "", "keys[0]"},
		{"an empty entry in the variable", "keys_env: KEYS", "real,,other", "keys_env"},
		{"a blank entry in the variable", "keys_env: KEYS", "real, \u2003", "keys_env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(cfg, []byte(tc.yaml+"\nlisten: 127.0.0.1:0\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // were it to start, it stops at once
			var stderr bytes.Buffer
			err := run(ctx, []string{"serve", "--config", cfg}, func(k string) string {
				return map[string]string{"KEYS": tc.env}[k]
			}, strings.NewReader(""), &bytes.Buffer{}, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("serve: %v, want an error naming %s\n%s", err, tc.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "listening") {
				t.Errorf("serve listened:\n%s", stderr.String())
			}
		})
	}
}

// system1 serve does not start with admin.listen on a public listener's
// address, the default one or --listen's included: it exits with an
// error naming admin.listen before it listens, rather than once the
// public listener holds the address.
func TestServeRefusesAdminOnAPublicAddress(t *testing.T) {
	const node = "nodes:\n  - {name: a, url: 'http://127.0.0.1:9', dialect: llamacpp}\n"
	for _, tc := range []struct {
		name, yaml string
		args       []string
	}{
		{"the default listen", node + "admin: {listen: '127.0.0.1:3000'}\n", nil},
		{"the --listen flag's", node + "admin: {listen: '127.0.0.1:36061'}\n", []string{"--listen", "127.0.0.1:36061"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(cfg, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // were it to start, it stops at once
			var stderr bytes.Buffer
			args := append([]string{"serve", "--config", cfg, "--state-dir", dir}, tc.args...)
			err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &stderr)
			if err == nil || !strings.Contains(err.Error(), "admin.listen") {
				t.Errorf("serve: %v, want an error naming admin.listen\n%s", err, stderr.String())
			}
			if strings.Contains(stderr.String(), "listening") {
				t.Errorf("serve listened:\n%s", stderr.String())
			}
		})
	}
}

// system1 serve does not start with refits asked for (calibration.
// refit_every) and the decision log they learn from turned off, whatever
// the calibration mode: with mode: apply it started and only warned that
// no refit would run.
func TestServeRefusesRefitsWithTheLogOff(t *testing.T) {
	const node = "nodes:\n  - {name: a, url: 'http://127.0.0.1:9', dialect: llamacpp}\nlisten: 127.0.0.1:0\ndecision_log: {off: true}\n"
	for _, calibration := range []string{
		"calibration: {refit_every: 10m}\n",
		"calibration: {mode: apply, refit_every: 10m}\ngateway: {fits: fits.json}\n",
	} {
		t.Run(calibration, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(cfg, []byte(node+calibration), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // were it to start, it stops at once
			var stderr bytes.Buffer
			err := run(ctx, []string{"serve", "--config", cfg, "--state-dir", dir}, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &stderr)
			if err == nil || !strings.Contains(err.Error(), "calibration.refit_every: the decision log is off") {
				t.Errorf("serve: %v, want an error naming calibration.refit_every and the log\n%s", err, stderr.String())
			}
		})
	}
}
