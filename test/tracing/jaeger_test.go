package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/cmd/system1/tracesdk"
	"system1/internal/config"
	"system1/internal/tracing"
)

const (
	callerTrace = "0af7651916cd43dd8448eb211c80319c"
	callerSpan  = "b7ad6b7169203331"
)

// One decision request, with the caller's traceparent, through a server
// wired with internal/tracing, over each OTLP protocol, turned on by the
// standard variables alone and by the tracing block alone: Jaeger
// receives the request's span under the caller's trace and span, a span
// per question under it, and a span per engine attempt under its
// question, with their attributes; each engine call carried the
// traceparent of its attempt's span.
func TestTracesReachJaeger(t *testing.T) {
	j := startJaeger(t)
	for i, protocol := range config.TracingProtocols {
		for k, by := range []string{"variables", "block"} {
			t.Run(protocol+"/"+by, func(t *testing.T) {
				traceReachesJaeger(t, j, protocol, by == "block", fmt.Sprintf("%02x", 2*i+k))
			})
		}
	}
}

// traceReachesJaeger is one case of TestTracesReachJaeger; tail ends the
// caller's trace id, so that the cases' traces are apart.
func traceReachesJaeger(t *testing.T, j *Jaeger, protocol string, byBlock bool, tail string) {
	service := "system1-test-" + strings.ReplaceAll(protocol, "/", "-")
	for _, k := range []string{tracesdk.EnvEndpoint, tracesdk.EnvTracesEndpoint, tracesdk.EnvProtocol, tracesdk.EnvTracesProtocol, tracesdk.EnvServiceName, tracesdk.EnvSampler, tracesdk.EnvSDKDisabled, tracesdk.EnvTracesExporter} {
		t.Setenv(k, "")
	}
	var block config.Tracing
	if byBlock {
		block = config.Tracing{Endpoint: j.Endpoint(protocol), Protocol: protocol, ServiceName: service, Sampler: "parentbased_always_on"}
	} else {
		t.Setenv(tracesdk.EnvEndpoint, j.Endpoint(protocol))
		t.Setenv(tracesdk.EnvProtocol, protocol)
		t.Setenv(tracesdk.EnvServiceName, service)
		t.Setenv(tracesdk.EnvSampler, "parentbased_always_on")
	}
	ctx := context.Background()
	tr, err := tracesdk.Setup(ctx, tracesdk.Options{Config: block, Version: "v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() {
		t.Fatalf("%s did not turn tracing on", j.Endpoint(protocol))
	}
	e := newEngine(t)
	srv := httptest.NewServer(wired(tr, e.call, questions(2)))
	defer srv.Close()

	traceID := callerTrace[:30] + tail
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/systemone", strings.NewReader(`{"secret":"do not trace me"}`))
	req.Header.Set("traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := tr.Shutdown(sctx); err != nil { // sends what is batched
		t.Fatal(err)
	}

	// 1 request + 2 questions + 3 attempts (the first failed over).
	got := await(t, j, traceID, 6)
	if len(got.Spans) != 6 {
		t.Fatalf("%d spans, want 6", len(got.Spans))
	}
	for _, s := range got.Spans {
		if s.TraceID != traceID {
			t.Errorf("span %s is in trace %s, not the caller's", s.OperationName, s.TraceID)
		}
		if _, ok := s.Tag(string(tracing.AttrInputValue)); ok {
			t.Errorf("span %s carries the state, though include_state is off", s.OperationName)
		}
	}
	reqs := got.Named("POST /v1/systemone")
	if len(reqs) != 1 {
		t.Fatalf("%d request spans", len(reqs))
	}
	rs := reqs[0]
	if rs.Parent() != callerSpan {
		t.Errorf("the request's parent is %q, not the caller's span %s", rs.Parent(), callerSpan)
	}
	p := got.Processes[rs.ProcessID]
	if p.ServiceName != service {
		t.Errorf("service %q", p.ServiceName)
	}
	if !hasTag(p.Tags, "service.version", "v9.9.9") {
		t.Errorf("the process's tags lack service.version v9.9.9: %v", p.Tags)
	}
	wantTags(t, rs, map[string]any{
		"span.kind":                           "server",
		string(tracing.AttrHTTPRoute):         "/v1/systemone",
		string(tracing.AttrHTTPMethod):        "POST",
		string(tracing.AttrHTTPStatus):        float64(200),
		string(tracing.AttrRequestID):         "req-test",
		string(tracing.AttrOpenInferenceKind): "CHAIN",
	})

	qspans := got.Named(tracing.SpanQuestion)
	if len(qspans) != 2 {
		t.Fatalf("%d question spans", len(qspans))
	}
	var qids []string
	for _, q := range qspans {
		if q.Parent() != rs.SpanID {
			t.Errorf("question %s is not under the request", q.SpanID)
		}
		id, _ := q.Tag(string(tracing.AttrQuestionID))
		qids = append(qids, id.(string))
		wantTags(t, q, map[string]any{
			string(tracing.AttrQuestionKind):    "choice",
			string(tracing.AttrQuestionOptions): float64(3),
			string(tracing.AttrOutcome):         "answered",
		})
	}
	slices.Sort(qids)
	if !slices.Equal(qids, []string{"q0", "q1"}) {
		t.Errorf("question ids %v", qids)
	}

	attempts := got.Named("decision " + model)
	if len(attempts) != 3 {
		t.Fatalf("%d attempt spans", len(attempts))
	}
	var ok, failed int
	var attemptIDs []string
	for _, a := range attempts {
		attemptIDs = append(attemptIDs, a.SpanID)
		if !slices.ContainsFunc(qspans, func(q Span) bool { return q.SpanID == a.Parent() }) {
			t.Errorf("attempt %s is not under a question", a.SpanID)
		}
		wantTags(t, a, map[string]any{
			"span.kind":                           "client",
			string(tracing.AttrGenAIOperation):    "decision",
			string(tracing.AttrGenAIRequestModel): model,
			string(tracing.AttrGenAIProvider):     dialect,
			string(tracing.AttrDialect):           dialect,
			string(tracing.AttrOpenInferenceKind): "DECISION",
			string(tracing.AttrDecisionModel):     model,
			string(tracing.AttrDecisionSystem):    dialect,
		})
		switch node, _ := a.Tag(string(tracing.AttrNode)); node {
		case upNode:
			ok++
			wantTags(t, a, map[string]any{
				string(tracing.AttrOutcome):              "ok",
				string(tracing.AttrGenAIInputTokens):     float64(24),
				string(tracing.AttrGenAIOutputTokens):    float64(1),
				string(tracing.AttrDecisionInputTokens):  float64(24),
				string(tracing.AttrDecisionOutputTokens): float64(1),
				string(tracing.AttrLabelMass):            0.93,
			})
		case downNode:
			failed++
			wantTags(t, a, map[string]any{
				string(tracing.AttrOutcome):   "unavailable",
				string(tracing.AttrErrorType): "unavailable",
				"error":                       true,
			})
			if _, has := a.Tag(string(tracing.AttrLabelMass)); has {
				t.Error("a failed attempt carries a label mass")
			}
		default:
			t.Errorf("attempt on node %v", node)
		}
	}
	if ok != 2 || failed != 1 {
		t.Errorf("%d answered and %d failed attempts, want 2 and 1", ok, failed)
	}

	// The engine saw each attempt's span as its parent, in the
	// caller's trace, sampled.
	var want []string
	for _, id := range attemptIDs {
		want = append(want, "00-"+traceID+"-"+id+"-01")
	}
	sent := e.traceparents()
	slices.Sort(want)
	slices.Sort(sent)
	if !slices.Equal(sent, want) {
		t.Errorf("the engine got traceparents\n%v\nwant\n%v", sent, want)
	}
}

func wantTags(t *testing.T, s Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got, ok := s.Tag(k)
		if !ok || got != v {
			t.Errorf("span %s (%s): %s = %v (%T), want %v", s.OperationName, s.SpanID, k, got, got, v)
		}
	}
}

func hasTag(tags []Tag, key string, value any) bool {
	return slices.ContainsFunc(tags, func(t Tag) bool { return t.Key == key && t.Value == value })
}

// await polls the query API until trace id holds at least spans spans,
// or fails the test after a minute (exporters send in batches, and
// Jaeger stores in batches too).
func await(t testing.TB, j *Jaeger, id string, spans int) *Trace {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		tr, err := j.Get(context.Background(), id)
		if err == nil && len(tr.Spans) >= spans {
			return tr
		}
		if err != nil && !errors.Is(err, ErrNotYet) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			n := 0
			if tr != nil {
				n = len(tr.Spans)
			}
			log, _ := os.ReadFile(j.Log)
			t.Fatalf("trace %s has %d of %d spans in jaeger after a minute; jaeger's log:\n%s", id, n, spans, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
