package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/outcomes"
)

// maxShadowReply bounds the report read from a server.
const maxShadowReply = 64 << 20

// cmdShadow prints the shadow rollouts' report: from the decision log the
// configuration names, or from a running server's GET /v1/shadow.
func cmdShadow(ctx context.Context, args []string, e env) error {
	fs := flags("shadow", e, `usage: system1 shadow --report [--config FILE] [--window 168h]
       system1 shadow --report --url http://HOST:PORT [--key-env VAR] [--window 168h]

Compares, per served model, candidate and question signature, the answers
a shadow rollout's candidate gave beside the served ones (shadow in the
configuration): agreement of the top answer, mean absolute change of the
probabilities, confidence shift and, where outcomes were reported,
accuracy, ECE and log-loss of each side, with a recommendation and its
evidence. See docs/shadow.md.

`)
	report := fs.Bool("report", false, "print the report (the only action for now)")
	cfgFlag := fs.String("config", "", "configuration file whose decision log is read "+configDefault)
	server := fs.String("url", "", "read GET /v1/shadow of the system1 server at this base URL instead of the log")
	keyEnv := fs.String("key-env", "SYSTEM1_KEY", "with --url: the variable holding the server's bearer key, if it needs one")
	window := fs.Duration("window", outcomes.DefaultShadowWindow, "how far back the shadow answers are read")
	stateDir := fs.String("state-dir", "", "folder of the decision log "+stateDirDefault)
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case !*report:
		return e.usageError("shadow", "--report is required")
	case len(fs.Args()) > 0:
		return e.usageError("shadow", "no arguments are taken")
	case *window <= 0:
		return e.usageError("shadow", "--window must be positive")
	case *server != "" && (*cfgFlag != "" || *stateDir != ""):
		return e.usageError("shadow", "--url reads a server's report: no --config or --state-dir with it")
	}
	if *server != "" {
		key, err := bearerKey(e, *keyEnv, true)
		if err != nil {
			return err
		}
		return shadowFromServer(ctx, e, *server, key, *window)
	}
	_, l, err := openLogFor(ctx, e, *cfgFlag, *stateDir)
	if err != nil {
		return err
	}
	defer closeDecisionLog(l, logger(e))
	now := time.Now()
	rep, err := outcomes.ReportShadow(ctx, l, now.Add(-*window), now)
	if err != nil {
		return err
	}
	return printJSON(e, rep)
}

// shadowFromServer prints a server's GET /v1/shadow.
func shadowFromServer(ctx context.Context, e env, base, key string, window time.Duration) error {
	// The base URL's path is kept (a server behind a prefix).
	if err := checkBaseURL("--url", base); err != nil {
		return err
	}
	u, _ := url.Parse(base)
	u = u.JoinPath("v1", "shadow")
	u.RawQuery = url.Values{"window": {window.String()}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET /v1/shadow: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxShadowReply))
	if err != nil {
		return fmt.Errorf("GET /v1/shadow: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/shadow: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var rep outcomes.ShadowReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("GET /v1/shadow: the reply is not a shadow report: %w", err)
	}
	return printJSON(e, rep)
}

// DefaultReplayLimit bounds the questions one replay asks.
const DefaultReplayLimit = 1000

// cmdReplay asks the questions the decision log kept (with
// decision_log.keep_states) of a candidate model and prints the shadow
// report of its answers against the ones served.
func cmdReplay(ctx context.Context, args []string, e env) error {
	fs := flags("replay", e, `usage: system1 replay --from-log --candidate MODEL [--config FILE] [--window 168h] [--limit 1000]

Asks the questions the decision log kept (decision_log.keep_states: true
keeps each state and question) of a candidate model, through the same
answer path and fits as serve, and prints the report system1 shadow
--report prints for a live rollout: per served model and question
signature, how the candidate's answers compare and, where outcomes were
reported, which side is right more often. Nothing is recorded. See
docs/shadow.md.

`)
	fromLog := fs.Bool("from-log", false, "replay the decision log's questions (the only source for now)")
	candidate := fs.String("candidate", "", "the model to ask: one the configuration's nodes serve (required)")
	cfgFlag := fs.String("config", "", "configuration file: its nodes, fits and decision log "+configDefault)
	window := fs.Duration("window", outcomes.DefaultShadowWindow, "how far back the logged questions are read")
	limit := fs.Int("limit", DefaultReplayLimit, "the most questions asked, the latest first")
	stateDir := fs.String("state-dir", "", "folder of the decision log "+stateDirDefault)
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case !*fromLog:
		return e.usageError("replay", "--from-log is required")
	case *candidate == "":
		return e.usageError("replay", "--candidate is required")
	case len(fs.Args()) > 0:
		return e.usageError("replay", "no arguments are taken")
	case *window <= 0:
		return e.usageError("replay", "--window must be positive")
	case *limit < 1:
		return e.usageError("replay", "--limit must be at least 1")
	}
	log := logger(e)
	cfg, l, err := openLogFor(ctx, e, *cfgFlag, *stateDir)
	if err != nil {
		return err
	}
	defer closeDecisionLog(l, log)
	router, err := localRouter(cfg, e.getenv, log)
	if err != nil {
		return err
	}
	// With no calibration mode written, serve's answer path applies the
	// fits its default loop keeps (Config.Learn), once there are any.
	serving, err := servingFits(learnt(cfg, *stateDir, e.getenv), log)
	if err != nil {
		return err
	}
	fits, err := decideFits(cfg, serving, log)
	if err != nil {
		return err
	}
	now := time.Now()
	rep, err := outcomes.Replay(ctx, answerPath(cfg, fits, nil, answer.Options{Router: router, Local: true}), l, *candidate, now.Add(-*window), now, *limit)
	if errors.Is(err, outcomes.ErrNothingToReplay) && cfg.DecisionLog.KeepStates {
		return fmt.Errorf("the decision log holds no question to replay in the last %v (--window): no request of another model than %s was logged in it with its state kept", *window, *candidate)
	}
	if err != nil {
		return err
	}
	return printJSON(e, rep)
}
