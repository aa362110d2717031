package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"system1/cmd/system1/tracesdk"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/tracing"
)

// traceCloseTimeout bounds how long a closing face waits for the tracer
// to send its last spans. It runs beside the decision log's close and is
// no longer than logCloseTimeout, so that the shutdown's tail stays
// cancelGrace + logCloseTimeout (the Helm chart's shutdownTailSeconds).
const traceCloseTimeout = 5 * time.Second

// setupTracing builds the tracer the configuration's tracing block and
// the OTEL_* variables ask for, with the SDK the program picks: nil, tracing off, unless one names an
// endpoint (docs/tracing.md).
func setupTracing(ctx context.Context, c config.Tracing, log *slog.Logger) (*tracing.Tracer, error) {
	tr, err := tracesdk.Setup(ctx, tracesdk.Options{Config: c, Version: version, Log: log})
	if err != nil {
		return nil, err
	}
	if tr.Enabled() {
		// The endpoint is not logged: its URL may carry a key.
		log.Info("tracing on: spans go to the OTLP collector the configuration or OTEL_EXPORTER_OTLP_ENDPOINT names", "request_id", "-")
	}
	return tr, nil
}

// closeLogAndTracer closes the decision log and the tracer at once, each
// within its own bound: the tracer sends its last spans for at most
// traceCloseTimeout.
func closeLogAndTracer(dlog *decisionlog.Log, tr *tracing.Tracer, log *slog.Logger) {
	var wg sync.WaitGroup
	if tr.Enabled() {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), traceCloseTimeout)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				log.Warn("tracing: the last spans were not all sent", "request_id", "-", "err", err)
			}
		})
	}
	closeDecisionLog(dlog, log)
	wg.Wait()
}
