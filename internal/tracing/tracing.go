// Package tracing is system1's tracing over the OpenTelemetry API: the
// spans of a request, its questions, their engine attempts, feedback and
// refits, and the names their attributes carry. It never imports the
// SDK or an exporter: the program picks those (cmd/system1/tracesdk)
// and hands New a provider, as OpenTelemetry advises libraries to do.
//
// Tracing is off unless the program turned it on. Off, a Tracer is nil
// or empty, every function here returns at once with a span that records
// nothing, and no header is read or written. On, a request's span is the
// child of the caller's W3C traceparent, and Inject sends the current
// span's traceparent on to the engines.
//
// Only a root (StartRequest, StartCall, StartRefit) needs the Tracer; it
// rides in the context from there, so the functions for the spans below
// it need only the context.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope system1's spans are filed under.
const scope = "system1"

// Provider is a tracer provider the program set up, which it can shut
// down: the SDK's, which this package does not import.
type Provider interface {
	trace.TracerProvider
	Shutdown(ctx context.Context) error
}

// Tracer is tracing set up: nil, or the zero Tracer, is tracing off.
type Tracer struct {
	provider     Provider
	tracer       trace.Tracer
	prop         propagation.TextMapPropagator
	includeState bool
}

// New wraps a provider, with W3C TraceContext and Baggage as its
// propagators; version is the binary's, the scope's version, and
// includeState puts a request's state on its span.
func New(p Provider, version string, includeState bool) *Tracer {
	return &Tracer{
		provider:     p,
		tracer:       p.Tracer(scope, trace.WithInstrumentationVersion(version)),
		prop:         propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		includeState: includeState,
	}
}

// Enabled reports whether t records spans.
func (t *Tracer) Enabled() bool { return t != nil && t.provider != nil }

// Shutdown sends the spans still waiting and closes the exporter, within
// ctx; a nil or off Tracer has nothing to do.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
