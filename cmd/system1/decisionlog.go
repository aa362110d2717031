package main

import (
	"context"
	"log/slog"
	"time"

	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/metrics"
)

// logCloseTimeout bounds how long a closing face waits for the decision
// log's queue to be written.
const logCloseTimeout = 10 * time.Second

// openDecisionLog opens the configuration's decision log (the SQLite
// file in the state directory by default, PostgreSQL when a url or
// url_env is set).
// It returns nil, a log that is off, when the configuration turns it off
// or it cannot be opened: a decision is never failed by the log, so the
// face serves on and says why in its log. m, when not nil, exports its
// counts.
func openDecisionLog(ctx context.Context, c config.DecisionLog, stateDir string, e env, log *slog.Logger, m *metrics.Metrics) *decisionlog.Log {
	if c.Off {
		log.Info("decision log off (decision_log.off)", "request_id", "-")
		return nil
	}
	opt, err := decisionlog.OptionsFrom(c, stateDir, e.getenv)
	var l *decisionlog.Log
	if err == nil {
		opt.Logger = log
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err = decisionlog.Open(octx, opt)
	}
	if err != nil && ctx.Err() == context.Canceled {
		return nil // a signal: the face stops, and says so
	}
	if err != nil {
		// Never a file of this replica's own instead of the shared log;
		// the error never repeats a PostgreSQL URL.
		log.Error("decision log unavailable: answers are not recorded and feedback is refused", "request_id", "-", "err", err)
		return nil
	}
	log.Info("decision log open", "request_id", "-", "at", logWhere(c, opt), "keep_states", opt.KeepStates)
	if m != nil {
		m.WatchDecisionLog(l.Dropped, func() uint64 { return l.Stats().Written }, func() uint64 { return l.Stats().Failed })
	}
	return l
}

// logWhere names where the decision log of c, opened with opt, is,
// without repeating a PostgreSQL URL (it may hold a password).
func logWhere(c config.DecisionLog, opt decisionlog.Options) string {
	switch {
	case c.URLEnv != "":
		return "postgresql (decision_log.url_env: $" + c.URLEnv + ")"
	case opt.URL != "":
		return "postgresql (decision_log.url)"
	}
	return opt.Path
}

// closeDecisionLog writes what the log has queued, for at most
// logCloseTimeout, and closes it.
func closeDecisionLog(l *decisionlog.Log, log *slog.Logger) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), logCloseTimeout)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		log.Error("decision log: closing", "request_id", "-", "err", err)
		return
	}
	s := l.Stats()
	log.Info("decision log closed", "request_id", "-", "written", s.Written, "dropped", s.Dropped, "failed", s.Failed)
}
