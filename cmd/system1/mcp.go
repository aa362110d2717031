package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/gateway"
	"system1/internal/mcpserver"
	"system1/internal/outcomes"
	"system1/internal/pause"
	"system1/internal/tracing"
)

// cmdMCP serves the gateway as an MCP server over stdin and stdout. It
// answers initialize at once and contacts no provider before the first
// tool call; a broken configuration does not stop it: health and
// capabilities report it, and decide answers config_error.
func cmdMCP(ctx context.Context, args []string, e env) error {
	fs := flags("mcp", e, `usage: system1 mcp [flags]

Serves the System 1 gateway as an MCP server over stdio (tools system1_decide, system1_feedback,
system1_health, system1_capabilities; docs/plugin.md) until stdin closes: stdout carries the
protocol, the log goes to stderr.

flags:
`)
	cfgFlag := fs.String("config", "", "configuration file "+configDefault)
	maxLine := fs.Int("max-line-bytes", mcpserver.DefaultMaxLineBytes, "longest line read from stdin, in bytes (0 or less: the default); a longer one is answered with a JSON-RPC error, not read into memory")
	drain := fs.Duration("drain-grace", mcpserver.DefaultDrainGrace, "after stdin closes, how long the requests already read are still answered before the server exits (0: the default; negative: not at all); a request still running then gets a JSON-RPC error")
	stateDir := fs.String("state-dir", "", "folder of the pause state file "+stateDirDefault)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := noArguments(fs, e); err != nil {
		return err
	}
	// A client gone whole (stdout closed too) fails the write of a reply
	// with EPIPE, where SIGPIPE would kill the process on it: the server
	// then ends as at the end of input, closing its decision log.
	signal.Ignore(syscall.SIGPIPE)
	log := logger(e)
	g, dlog, tr := newGatewayLogged(ctx, configPath(*cfgFlag, e.getenv), *stateDir, e, log, mcpserver.Wording, decisionlog.FaceMCP)
	defer closeLogAndTracer(dlog, tr, log)
	log.Info("mcp server starting", "request_id", "-", "version", version, "config", configPath(*cfgFlag, e.getenv),
		"chain", len(g.Chain()), "config_errors", len(g.ConfigErrors()), "state_file", pause.Path(*stateDir, e.getenv))
	for _, msg := range g.ConfigErrors() {
		log.Warn("configuration error; system1_decide answers config_error until it is fixed", "request_id", "-", "err", msg)
	}
	err := mcpserver.New(mcpserver.Options{Gateway: g, Feedback: outcomes.NewFeedback(dlog), Log: log, Tracer: tr, Version: version}).Run(ctx,
		&mcpserver.LineTransport{Reader: e.stdin, Writer: e.stdout, MaxLineBytes: *maxLine, DrainGrace: *drain, Log: log})
	switch {
	case ctx.Err() != nil:
		log.Info("mcp server stopped by a signal", "request_id", "-")
		return nil
	case err == nil, errors.Is(err, io.EOF):
		log.Info("mcp server stopped: the client closed stdin", "request_id", "-")
		return nil
	case errors.Is(err, syscall.EPIPE):
		log.Info("mcp server stopped: the client closed stdout", "request_id", "-")
		return nil
	}
	return err
}

// mcpLogOpenTimeout bounds how long system1 mcp waits for its decision
// log to open (a PostgreSQL server that does not answer) before it
// serves without one: Claude Code gives an MCP server 30 s to start, and
// the plugin's launcher may have waited up to 10 s for a build already.
const mcpLogOpenTimeout = 10 * time.Second

// newGatewayLogged reads the configuration at path and builds the gateway
// over it. A configuration that cannot be read becomes a configuration
// error of the gateway, never a failure: the caller still gets a gateway
// that says what is wrong. w is how the face names its own commands. When
// face is not empty it also opens the configuration's decision log and
// records the gateway's answers in it as that face. The log is nil when
// off or unavailable; so is the tracer the configuration's tracing block
// asks for when tracing is off, or it cannot be set up (a configuration
// error). The caller closes both.
func newGatewayLogged(ctx context.Context, path, stateDir string, e env, log *slog.Logger, w gateway.Wording, face string) (*gateway.Gateway, *decisionlog.Log, *tracing.Tracer) {
	var errs []error
	cfg, err := config.Load(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("no configuration file at %s: write one (see docs/plugin.md), or point --config or $SYSTEM1_CONFIG at one", path)
			// run.sh's file was looked at only when no file was named
			// (configPath): a file named and missing is that file alone.
			named := e.getenv("SYSTEM1_CONFIG") != "" || path != configPath("", e.getenv)
			if r := runConfigPath(e.getenv); r != "" && r != path && !named {
				err = fmt.Errorf("no configuration file at %s, nor at %s, where scripts/run.sh writes one for the engine it starts (read when the first is missing): run scripts/run.sh, write one (see docs/plugin.md), or point --config or $SYSTEM1_CONFIG at one", path, r)
			}
		}
		errs = append(errs, err)
	}
	var dlog *decisionlog.Log
	var svc *answer.Service
	var tr *tracing.Tracer
	if cfg != nil {
		// The fits serve's default loop learns in this state folder are
		// applied here too, from its first refit on.
		cfg.Gateway.Fits = loopFits(cfg, stateDir, e.getenv)
		if tr, err = setupTracing(ctx, cfg.Tracing, log); err != nil {
			errs = append(errs, err)
		}
		if face != "" {
			lctx := ctx
			if face == decisionlog.FaceMCP {
				var cancel context.CancelFunc
				lctx, cancel = context.WithTimeout(ctx, mcpLogOpenTimeout)
				defer cancel()
			}
			dlog = openDecisionLog(lctx, cfg.DecisionLog, stateDir, e, log, nil)
		}
		var more []error
		svc, more = chainPath(cfg, e.getenv, dlog, log)
		errs = append(errs, more...)
	}
	return gateway.New(gateway.Options{
		Config: cfg, ConfigPath: path, ConfigErrors: errs, Answer: svc,
		Log: log, StatePath: pause.Path(stateDir, e.getenv), Version: version, Wording: w, Face: face,
	}), dlog, tr
}
