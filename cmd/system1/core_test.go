package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/gateway"
)

// What the command line's faces build from a configuration and cannot
// is a configuration error of the gateway, reported and answered as
// config_error, never silently ignored: a fits file that does not load.
func TestChainPathErrorsAreConfigErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"fits missing", "gateway:\n  fits: missing.json\nproviders:\n  - {name: jev, kind: systemone, url: http://127.0.0.1:1, model: m}\n", "gateway.fits"},
		{"fits not JSON", "gateway:\n  fits: config.yaml\nproviders:\n  - {name: jev, kind: systemone, url: http://127.0.0.1:1, model: m}\n", "gateway.fits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			e := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
			g, dlog, _ := newGatewayLogged(context.Background(), path, dir, e, slog.New(slog.DiscardHandler), cliWording, "")
			if dlog != nil {
				t.Fatal("a decision log was opened for no face")
			}
			res := g.Decide(context.Background(), []byte(`{"question":"q"}`), "")
			if res.Error == nil || res.Error.Code != gateway.CodeConfigError || !strings.Contains(res.Error.Message, c.want) {
				t.Fatalf("response %+v", res)
			}
		})
	}
}
