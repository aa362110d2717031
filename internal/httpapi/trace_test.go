package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"system1/internal/tracing"
)

// A request's span is named by the route that served it, as the
// OpenAPI document names the route, and by its method alone where no
// route served it: a 404 for a path nothing serves is not the page's
// "GET /", and http.route is left out, as the HTTP conventions ask.
func TestRequestSpanRoute(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := New(Options{Tracer: tracing.New(tp, "test", false)})
	for _, c := range []struct {
		method, path string
		name, route  string // route "" is none
	}{
		{http.MethodGet, "/", "GET /", "/"},
		{http.MethodGet, "/nowhere", "GET", ""},
		{http.MethodPost, "/v1/typo", "POST", ""},
		{http.MethodPost, "/v1/models/x", "POST", ""},
		{http.MethodGet, "/docs", "GET /docs", "/docs"},
		{http.MethodDelete, "/v1/systemone", "DELETE", ""}, // a 405: no route served it
	} {
		exp.Reset()
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("%s %s: %d spans", c.method, c.path, len(spans))
		}
		route := ""
		for _, kv := range spans[0].Attributes {
			if kv.Key == tracing.AttrHTTPRoute {
				route = kv.Value.AsString()
			}
		}
		if spans[0].Name != c.name || route != c.route {
			t.Errorf("%s %s: span %q, http.route %q; want %q, %q", c.method, c.path, spans[0].Name, route, c.name, c.route)
		}
	}
}
