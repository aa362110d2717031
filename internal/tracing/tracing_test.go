package tracing

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"system1/internal/decision"
)

// recorded is a Tracer whose spans end in memory, synchronously.
func recorded(t *testing.T, includeState bool) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return New(tp, "test", includeState), exp
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func byName(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(spans))
	return tracetest.SpanStub{}
}

const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
const callerSpan = "00f067aa0ba902b7"

// One request as the wiring makes it: the caller's traceparent, a
// question, an attempt whose engine call carries the attempt's span on.
func TestRequestQuestionAttempt(t *testing.T) {
	tr, exp := recorded(t, false)
	var sent http.Header
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent = r.Header.Clone() }))
	defer engine.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/systemone", func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		SetState(ctx, []byte(`{"secret":"state"}`))
		q := decision.Question{ID: "spam", Kind: decision.Choice, Options: []decision.Option{{Key: "a"}, {Key: "b"}, {Key: "c"}}}
		ctx, qs := StartQuestion(ctx, q)
		actx, as := StartAttempt(ctx, "gpu-1", "qwen3", "llamacpp")
		hr, _ := http.NewRequestWithContext(actx, http.MethodPost, engine.URL, nil)
		Inject(actx, hr.Header)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Error(err)
		} else {
			resp.Body.Close()
		}
		EndAttempt(as, Attempt{Outcome: "ok", InputTokens: 40, OutputTokens: 1, LabelMass: 0.97, ResponseModel: "qwen3-0.6b"})
		EndQuestion(qs, "answered", nil)
		w.WriteHeader(http.StatusOK)
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tr.StartRequest(r.Context(), r, "req-1")
		r = r.WithContext(ctx)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		EndRequest(span, r, rec.Code)
	})
	req := httptest.NewRequest(http.MethodPost, "/v1/systemone", strings.NewReader("{}"))
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	req.Header.Set("baggage", "tenant=acme")
	h.ServeHTTP(httptest.NewRecorder(), req)

	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	rs, qs, as := byName(t, spans, "POST /v1/systemone"), byName(t, spans, SpanQuestion), byName(t, spans, "decision qwen3")
	if got := rs.SpanContext.TraceID().String(); got != callerTrace {
		t.Errorf("the request's trace is %s, not the caller's", got)
	}
	if rs.Parent.SpanID().String() != callerSpan || !rs.Parent.IsRemote() {
		t.Errorf("the request's parent is %v, not the caller's span", rs.Parent)
	}
	if qs.Parent.SpanID() != rs.SpanContext.SpanID() || as.Parent.SpanID() != qs.SpanContext.SpanID() {
		t.Error("the spans are not request > question > attempt")
	}
	if rs.SpanKind != trace.SpanKindServer || as.SpanKind != trace.SpanKindClient {
		t.Errorf("kinds %v and %v", rs.SpanKind, as.SpanKind)
	}
	for _, c := range []struct {
		span tracetest.SpanStub
		key  attribute.Key
		want any
	}{
		{rs, AttrHTTPRoute, "/v1/systemone"},
		{rs, AttrHTTPMethod, "POST"},
		{rs, AttrHTTPStatus, int64(200)},
		{rs, AttrRequestID, "req-1"},
		{qs, AttrQuestionID, "spam"},
		{qs, AttrQuestionKind, "choice"},
		{qs, AttrQuestionOptions, int64(3)},
		{qs, AttrOutcome, "answered"},
		{as, AttrNode, "gpu-1"},
		{as, AttrDialect, "llamacpp"},
		{as, AttrGenAIRequestModel, "qwen3"},
		{as, AttrGenAIResponseModel, "qwen3-0.6b"},
		{as, AttrGenAIOperation, "decision"},
		{as, AttrGenAIInputTokens, int64(40)},
		{as, AttrGenAIOutputTokens, int64(1)},
		{as, AttrDecisionInputTokens, int64(40)},
		{as, AttrOpenInferenceKind, "DECISION"},
		{as, AttrDecisionProvider, "gpu-1"},
		{as, AttrLabelMass, 0.97},
		{as, AttrOutcome, "ok"},
	} {
		if got := attrs(c.span)[c.key].AsInterface(); got != c.want {
			t.Errorf("%s: %s = %v, want %v", c.span.Name, c.key, got, c.want)
		}
	}
	if _, ok := attrs(rs)[AttrInputValue]; ok {
		t.Error("the state is on the span though include_state is off")
	}
	want := "00-" + callerTrace + "-" + as.SpanContext.SpanID().String() + "-01"
	if got := sent.Get("traceparent"); got != want {
		t.Errorf("the engine got traceparent %q, want %q (the attempt's span)", got, want)
	}
	if got := sent.Get("baggage"); got != "tenant=acme" {
		t.Errorf("the engine got baggage %q", got)
	}
}

func TestOffRecordsNothing(t *testing.T) {
	for _, tr := range []*Tracer{nil, {}} {
		ctx, span := tr.StartRequest(context.Background(), httptest.NewRequest("GET", "/", nil), "id")
		if span.IsRecording() || span.SpanContext().IsValid() {
			t.Fatal("an off Tracer's request span records")
		}
		ctx, qs := StartQuestion(ctx, decision.Question{ID: "q"})
		_, as := StartAttempt(ctx, "n", "m", "d")
		h := http.Header{}
		Inject(ctx, h)
		if qs.IsRecording() || as.IsRecording() || len(h) != 0 {
			t.Fatalf("off, yet a span records or headers were written: %v", h)
		}
		EndAttempt(as, Attempt{Outcome: "ok"})
		EndQuestion(qs, "answered", nil)
		EndRequest(span, httptest.NewRequest("GET", "/", nil), 200)
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Off, the caller's traceparent is neither read nor passed on.
func TestOffPassesNothingOn(t *testing.T) {
	var tr *Tracer
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	ctx, _ := tr.StartRequest(r.Context(), r, "id")
	h := http.Header{}
	Inject(ctx, h)
	if len(h) != 0 {
		t.Fatalf("off, the engine would get %v", h)
	}
}

func TestAttemptFailure(t *testing.T) {
	tr, exp := recorded(t, false)
	ctx, root := tr.StartCall(context.Background(), "mcp system1_decide")
	_, as := StartAttempt(ctx, "n1", "m", "ollama")
	EndAttempt(as, Attempt{Outcome: "timeout", LabelMass: 0, Err: errors.New("timeout: no answer in 5s")})
	_, as2 := StartAttempt(ctx, "n2", "m", "systemone")
	EndAttempt(as2, Attempt{Outcome: "ok", LabelMass: math.NaN()})
	root.End()
	spans := exp.GetSpans()
	failed := spans[0]
	if failed.Status.Code != codes.Error || failed.Status.Description != "timeout: no answer in 5s" {
		t.Errorf("status %+v", failed.Status)
	}
	a := attrs(failed)
	if a[AttrErrorType].AsString() != "timeout" || a[AttrOutcome].AsString() != "timeout" {
		t.Errorf("error.type %v, outcome %v", a[AttrErrorType], a[AttrOutcome])
	}
	for _, s := range spans[:2] {
		for _, k := range []attribute.Key{AttrLabelMass, AttrGenAIInputTokens, AttrGenAIResponseModel} {
			if _, ok := attrs(s)[k]; ok {
				t.Errorf("%s carries %s though the attempt did not report it", s.Name, k)
			}
		}
	}
	if spans[2].Name != "mcp system1_decide" || spans[2].SpanKind != trace.SpanKindServer {
		t.Errorf("the call's span: %s %v", spans[2].Name, spans[2].SpanKind)
	}
}

func TestStateOnlyWhenAsked(t *testing.T) {
	tr, exp := recorded(t, true)
	ctx, span := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/systemone", nil), "id")
	SetState(ctx, []byte(`{"a":1}`))
	span.End()
	big := strings.Repeat("é", MaxStateBytes) // 2 bytes each: the limit falls inside one
	ctx, span = tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/systemone", nil), "id")
	SetState(ctx, []byte(big))
	span.End()
	spans := exp.GetSpans()
	if got := attrs(spans[0])[AttrInputValue].AsString(); got != `{"a":1}` {
		t.Errorf("input.value %q", got)
	}
	got := attrs(spans[1])[AttrInputValue].AsString()
	if len(got) > MaxStateBytes || len(got) < MaxStateBytes-3 || !strings.HasPrefix(big, got) || !attrs(spans[1])[AttrStateTruncated].AsBool() {
		t.Errorf("a long state: %d bytes, prefix %v, truncated %v", len(got), strings.HasPrefix(big, got), attrs(spans[1])[AttrStateTruncated])
	}
}

func TestFeedbackAndRefit(t *testing.T) {
	tr, exp := recorded(t, false)
	ctx, span := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/feedback", nil), "id")
	_, fs := StartFeedback(ctx, 2)
	EndFeedback(fs, 2, nil)
	span.End()
	_, rs := tr.StartRefit(context.Background())
	EndRefit(rs, 4, 1, "r7", nil)
	spans := exp.GetSpans()
	fb, rf := byName(t, spans, SpanFeedback), byName(t, spans, SpanRefit)
	if a := attrs(fb); a[AttrFeedbackOutcomes].AsInt64() != 2 || a[AttrFeedbackRecorded].AsInt64() != 2 {
		t.Errorf("feedback %v", a)
	}
	if fb.Parent.SpanID() != byName(t, spans, "POST").SpanContext.SpanID() {
		t.Error("feedback is not under its request")
	}
	if a := attrs(rf); a[AttrRefitBuckets].AsInt64() != 4 || a[AttrRefitAdopted].AsInt64() != 1 || a[AttrRefitRevision].AsString() != "r7" {
		t.Errorf("refit %v", a)
	}
	if rf.Parent.IsValid() {
		t.Error("a background refit has a parent")
	}
}

func TestRequestNames(t *testing.T) {
	tr, exp := recorded(t, false)
	for _, c := range []struct{ method, pattern string }{
		{"POST", "POST /v1/systemone"},
		{"GET", "/health"},
		{"BREW", ""},
	} {
		r := httptest.NewRequest(c.method, "/x", nil)
		_, span := tr.StartRequest(context.Background(), r, "id")
		r.Pattern = c.pattern
		EndRequest(span, r, 503)
	}
	spans := exp.GetSpans()
	for i, want := range []string{"POST /v1/systemone", "GET /health", "_OTHER"} {
		if spans[i].Name != want {
			t.Errorf("span %d is %q, want %q", i, spans[i].Name, want)
		}
		if spans[i].Status.Code != codes.Error {
			t.Errorf("a 503 is not an error")
		}
	}
}

// Each name the attributes promise, spelled as the conventions spell it:
// a release of the semconv package that renamed one would fail here.
func TestAttributeNames(t *testing.T) {
	for k, want := range map[attribute.Key]string{
		AttrGenAIRequestModel:  "gen_ai.request.model",
		AttrGenAIResponseModel: "gen_ai.response.model",
		AttrGenAIInputTokens:   "gen_ai.usage.input_tokens",
		AttrGenAIOutputTokens:  "gen_ai.usage.output_tokens",
		AttrGenAIProvider:      "gen_ai.provider.name",
		AttrGenAIOperation:     "gen_ai.operation.name",
		AttrHTTPRoute:          "http.route",
		AttrHTTPStatus:         "http.response.status_code",
		AttrHTTPMethod:         "http.request.method",
		AttrErrorType:          "error.type",
	} {
		if string(k) != want {
			t.Errorf("%s, want %s", k, want)
		}
	}
}

// Every sampler the configuration accepts is one Setup builds.
// Setup with an endpoint builds a working Tracer without reaching the
// collector; with none it is off.
// A malformed traceparent is ignored (the request starts its own trace);
// a caller's unsampled flag leaves the request unrecorded under the
// default parent-based sampler, its traceparent still passed on.
func TestCallerTraceparent(t *testing.T) {
	tr, exp := recorded(t, false)
	for _, bad := range []string{"00-zz-yy-01", "00-" + callerTrace + "-0000000000000000-01", strings.Repeat("0", 600)} {
		r := httptest.NewRequest("POST", "/v1/systemone", nil)
		r.Header.Set("traceparent", bad)
		_, span := tr.StartRequest(context.Background(), r, "id")
		span.End()
	}
	for i, s := range exp.GetSpans() {
		if s.Parent.IsValid() || s.SpanContext.TraceID().String() == callerTrace {
			t.Errorf("malformed traceparent %d was followed: parent %v", i, s.Parent)
		}
	}
	exp.Reset()
	r := httptest.NewRequest("POST", "/v1/systemone", nil)
	r.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-00")
	ctx, span := tr.StartRequest(context.Background(), r, "id")
	actx, as := StartAttempt(ctx, "n", "m", "d")
	h := http.Header{}
	Inject(actx, h)
	as.End()
	span.End()
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("an unsampled caller's request recorded %d spans", n)
	}
	if got := h.Get("traceparent"); !strings.HasPrefix(got, "00-"+callerTrace+"-") || !strings.HasSuffix(got, "-00") {
		t.Errorf("an unsampled caller's trace reached the engine as %q", got)
	}
}

// A caller's bytes that are not UTF-8 (a path with %FF, a question id)
// and an engine's (its model's name, its failure's text) reach the
// collector as valid text: OTLP's exporter drops a whole batch, every
// request's spans in it, when one string is not UTF-8. Long ones are cut.
func TestHostileTextIsExported(t *testing.T) {
	var spans atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("the sink got what is not OTLP: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans.Add(1)
					for _, kv := range s.Attributes {
						if v := kv.Value.GetStringValue(); !utf8.ValidString(v) || len(v) > maxText {
							t.Errorf("%s: %q", kv.Key, v)
						}
					}
				}
			}
		}
	}))
	defer sink.Close()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	tr := New(tp, "test", true)

	r := httptest.NewRequest("POST", "/v1/%FF%FE"+strings.Repeat("x", 2*maxText), nil)
	ctx, span := tr.StartRequest(context.Background(), r, "id")
	SetState(ctx, []byte("\"\xff\""))
	qctx, qs := StartQuestion(ctx, decision.Question{ID: "q\xc3", Kind: "choice"})
	_, as := StartAttempt(qctx, "n\xff", "m\xfe", "llamacpp")
	EndAttempt(as, Attempt{Outcome: "malformed", ResponseModel: "r\xff", Err: errors.New("the engine said \xff")})
	EndQuestion(qs, "failed", errors.New("bad"))
	EndRequest(span, r, 200)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := spans.Load(); n != 3 {
		t.Fatalf("the collector got %d of 3 spans", n)
	}
}

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"aé", 2, "a"}, // é is 2 bytes: not split
		{"€€", 4, "€"},
		{"", 0, ""},
	} {
		if got := cut(c.in, c.n); got != c.want {
			t.Errorf("cut(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// The fleet's shape: every question's span opened at once, one context
// for all of them, and each attempt put under its own question by id.
func TestStartQuestions(t *testing.T) {
	tr, exp := recorded(t, false)
	ctx, span := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/systemone", nil), "id")
	qs := []decision.Question{{ID: "a", Kind: decision.Noul}, {ID: "b", Kind: decision.Choice}}
	ctx, questions := StartQuestions(ctx, qs)
	for _, id := range []string{"b", "a", "unknown"} {
		_, as := StartAttempt(ForQuestion(ctx, id), "n", "m", "llamacpp")
		EndAttempt(as, Attempt{Outcome: "ok", LabelMass: math.NaN()})
	}
	questions.End(0, "answered", nil)
	questions.End(1, "failed", errors.New("no node"))
	questions.End(2, "out of range", nil) // ignored
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 6 {
		t.Fatalf("%d spans", len(spans))
	}
	req := spans[5]
	qa, qb := spans[3], spans[4]
	if attrs(qa)[AttrQuestionID].AsString() != "a" || attrs(qb)[AttrQuestionID].AsString() != "b" || qb.Status.Code != codes.Error {
		t.Fatalf("questions %v %v", attrs(qa), attrs(qb))
	}
	for i, want := range []trace.SpanID{qb.SpanContext.SpanID(), qa.SpanContext.SpanID(), req.SpanContext.SpanID()} {
		if spans[i].Parent.SpanID() != want {
			t.Errorf("attempt %d's parent is %v, want %v", i, spans[i].Parent.SpanID(), want)
		}
	}
	if qa.Parent.SpanID() != req.SpanContext.SpanID() {
		t.Error("the questions are not under the request")
	}
}

// A route is written as the OpenAPI document writes it, not in the
// ServeMux's own syntax: the page's "GET /{$}" is "/", a wildcard's
// "{id...}" is "{id}".
func TestRequestRoutes(t *testing.T) {
	tr, exp := recorded(t, false)
	for _, c := range []struct{ pattern, name, route string }{
		{"GET /{$}", "GET /", "/"},
		{"GET /v1/models/{id...}", "GET /v1/models/{id}", "/v1/models/{id}"},
		{"GET /v1/usage", "GET /v1/usage", "/v1/usage"},
		{"", "GET", ""},
	} {
		exp.Reset()
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		_, span := tr.StartRequest(context.Background(), r, "id")
		r.Pattern = c.pattern
		EndRequest(span, r, 200)
		s := exp.GetSpans()[0]
		if got := attrs(s)[AttrHTTPRoute].AsString(); s.Name != c.name || got != c.route {
			t.Errorf("%q: span %q, http.route %q; want %q, %q", c.pattern, s.Name, got, c.name, c.route)
		}
	}
}
