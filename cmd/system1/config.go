package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"system1/internal/config"
)

// runConfig is where scripts/run.sh writes the configuration of the
// engine it starts, with system1 serve on its default port: one file per
// port, so that a second run.sh on other ports never rewrites the first
// one's. `scripts/run.sh --help` names the same file (test/scripts holds
// the two together).
const runConfig = "~/.cache/system1/run/config-3000.yaml"

// whereConfig says, for a person at a terminal, which configuration the
// command line read (path) and where to get one.
func whereConfig(path string) string {
	return "system1 reads " + path + ` (or --config FILE, or $SYSTEM1_CONFIG).
scripts/run.sh writes one for the engine it starts: ` + runConfig + `
(config-PORT.yaml with another $SYSTEM1_PORT; run.sh prints the path).
To write your own, see "Configuration" in the README and docs/plugin.md.`
}

// loadConfig reads the configuration a command of the command line names
// (configPath) and holds it to check: the whole of it, or the section the
// command reads (checkLog).
func loadConfig(ctx context.Context, flagValue string, getenv func(string) string, check func(*config.Config) []error) (*config.Config, error) {
	return readConfig(ctx, configPath(flagValue, getenv), "", check)
}

// readConfig reads the configuration at path and holds it to check. A
// missing file is explained (need, what the command needs it for, then
// whereConfig), not reported as a bare "no such file".
func readConfig(ctx context.Context, path, need string, check func(*config.Config) []error) (*config.Config, error) {
	cfg, err := config.LoadContext(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no configuration at %s%s.\n\n%s", path, need, whereConfig(path))
	}
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	if errs := check(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("configuration %s: %w", cfg.Path, errors.Join(errs...))
	}
	return cfg, nil
}

// checkLog holds a configuration to its decision log section alone, for
// the commands that read nothing else of it.
func checkLog(c *config.Config) []error { return c.DecisionLog.Check() }
