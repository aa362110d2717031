package fleet

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"system1/cmd/system1/tracesdk"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/tracing"
)

// sink is an OTLP/HTTP collector that keeps the spans it is sent.
type sink struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracev1.Span
}

func startSink(t *testing.T) *sink {
	s := &sink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("the sink got what is not OTLP: %v", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				s.spans = append(s.spans, ss.Spans...)
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// attempts are the client spans (engine attempts) received.
func (s *sink) attempts() []*tracev1.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*tracev1.Span
	for _, sp := range s.spans {
		if sp.Kind == tracev1.Span_SPAN_KIND_CLIENT {
			out = append(out, sp)
		}
	}
	return out
}

func spanAttrs(sp *tracev1.Span) map[string]any {
	m := map[string]any{}
	for _, kv := range sp.Attributes {
		if s := kv.Value.GetStringValue(); s != "" {
			m[kv.Key] = s
		} else {
			m[kv.Key] = kv.Value.GetIntValue()
		}
	}
	return m
}

// A node over a System One or a Decisions endpoint makes one call for a
// request's questions, and that call is an engine attempt in the trace
// as any backend's: a client span naming the node, the dialect and the
// model, with the tokens the endpoint counted and the outcome.
func TestForwardedCallIsTraced(t *testing.T) {
	for k, v := range map[string]string{tracesdk.EnvEndpoint: "", tracesdk.EnvTracesEndpoint: "", tracesdk.EnvSDKDisabled: "",
		tracesdk.EnvTracesExporter: "", tracesdk.EnvProtocol: "", tracesdk.EnvTracesProtocol: "", tracesdk.EnvSampler: ""} {
		t.Setenv(k, v)
	}
	// Both fakes count 10 input tokens; output, 1 (System One) or one per
	// question (Decisions).
	reply := fakeengine.Reply{Model: fakeengine.DefaultModel}
	for _, c := range []struct {
		dialect string
		url     func() string
		output  int64
	}{
		{"systemone", func() string { return fakeengine.StartSystemOne(t, reply).URL + "/v1/systemone" }, 1},
		{"decisions", func() string { return fakeengine.StartDecisions(t, reply).URL }, 2},
	} {
		t.Run(c.dialect, func(t *testing.T) {
			s := startSink(t)
			tr, err := tracesdk.Setup(t.Context(), tracesdk.Options{Config: config.Tracing{Endpoint: s.URL, Protocol: "http/protobuf"}})
			if err != nil {
				t.Fatal(err)
			}
			n, err := NewNode(config.Node{Name: "up-" + c.dialect, URL: c.url(), Dialect: c.dialect, Models: []string{fakeengine.DefaultModel},
				Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := New([]*Node{n}, Options{})
			ctx, span := tr.StartCall(t.Context(), "test")
			req := decision.Request{Model: fakeengine.DefaultModel, State: json.RawMessage(`"s"`), Questions: []decision.Question{
				{ID: "a", Kind: decision.Noul, Instructions: json.RawMessage(`"?"`), Options: decision.NoulOptions(nil, nil)},
				{ID: "b", Kind: decision.Choice, Instructions: json.RawMessage(`"?"`), Options: []decision.Option{{Key: "x", Name: "x"}, {Key: "y", Name: "y"}}}}}
			res, err := r.Decide(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range res.Questions {
				if q.Err != nil {
					t.Fatalf("%s: %v", c.dialect, q.Err)
				}
			}
			tracing.EndCall(span, nil)
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := s.attempts()
			if len(got) != 1 {
				t.Fatalf("%d attempt spans for one forwarded call, want 1", len(got))
			}
			a := spanAttrs(got[0])
			for key, want := range map[string]any{
				string(tracing.AttrNode): n.Name, string(tracing.AttrDialect): c.dialect,
				string(tracing.AttrDecisionModel): fakeengine.DefaultModel, string(tracing.AttrOutcome): "ok",
				string(tracing.AttrGenAIInputTokens): int64(10), string(tracing.AttrGenAIOutputTokens): c.output,
			} {
				if a[key] != want {
					t.Errorf("%s = %v, want %v (%v)", key, a[key], want, a)
				}
			}
		})
	}
}
