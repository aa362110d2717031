package tracing_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"system1/cmd/system1/tracesdk"
	"system1/internal/fakeengine"
	"system1/internal/procstat"
	"system1/internal/testbin"
	"system1/internal/tracing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// binary is the real system1 binary, built once for the package.
func binary(tb testing.TB) string {
	tb.Helper()
	bin, err := testbin.Path()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// clearOTel empties the standard variables for the processes a test
// starts, so that only its configuration turns tracing on.
func clearOTel(tb testing.TB) {
	for _, k := range []string{tracesdk.EnvEndpoint, tracesdk.EnvTracesEndpoint, tracesdk.EnvProtocol, tracesdk.EnvTracesProtocol,
		tracesdk.EnvServiceName, tracesdk.EnvSampler, tracesdk.EnvSDKDisabled, tracesdk.EnvTracesExporter} {
		tb.Setenv(k, "")
	}
}

// process is a system1 serve the test started.
type process struct {
	URL    string
	cmd    *exec.Cmd
	out    *testbin.Output
	exited chan struct{}
	err    error
}

// serveBinary starts the real binary on cfg, returning once it answers
// /health; it is killed when the test ends unless it exited.
func serveBinary(tb testing.TB, cfg string) *process {
	tb.Helper()
	dir := tb.TempDir()
	path := filepath.Join(dir, "system1.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		tb.Fatal(err)
	}
	addr, err := testbin.FreeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	p := &process{URL: "http://" + addr, out: &testbin.Output{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary(tb), "serve", "--config", path, "--state-dir", dir, "--listen", addr)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	tb.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	if err := testbin.WaitHealthy(p.URL, p.exited, time.Minute); err != nil {
		tb.Fatalf("%v\n%s", err, p.out.String())
	}
	return p
}

// stop sends SIGTERM and waits for the process to exit 0: the tracer
// sends its last spans in the shutdown.
func (p *process) stop(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute): // a hang guard
		tb.Fatalf("system1 did not stop on SIGTERM\n%s", p.out.String())
	}
	if p.err != nil {
		tb.Fatalf("system1 stopped with %v\n%s", p.err, p.out.String())
	}
}

// twoQuestions is a /v1/systemone request of two choices over state.
func twoQuestions(state string) string {
	return fmt.Sprintf(`{"model":%q,"state":%q,"questions":{`+
		`"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}},`+
		`"tone":{"type":"choice","criteria":{"calm":null,"angry":null}}}}`, fakeengine.DefaultModel, state)
}

// One decision through the real binary, with a caller's traceparent, on
// a configuration whose tracing block names a real Jaeger: Jaeger holds
// the request's span under the caller's span, a span per question under
// it and a span per engine attempt under its question, with their
// attributes, and no state; the engine (a fake llama-server) received
// each attempt's traceparent, in the caller's trace. The outcome reported
// for it (POST /v1/feedback, in a trace of its own) is a feedback span
// under its request's.
func TestBinaryTracesReachJaeger(t *testing.T) {
	j := startJaeger(t)
	clearOTel(t)
	e := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(e.Close)
	const service = "system1-binary-test"
	p := serveBinary(t, fmt.Sprintf(`nodes:
  - {name: engine, url: %s, dialect: llamacpp, models: [%s]}
tracing: {endpoint: %s, protocol: http/protobuf, service_name: %s}
`, e.URL, fakeengine.DefaultModel, j.HTTP, service))
	if !strings.Contains(p.out.String(), "tracing on") {
		t.Errorf("the start-up log does not say tracing is on:\n%s", p.out.String())
	}

	traceID := callerTrace[:30] + "b1"
	const secret = "the state stays out of the trace"
	resp, body := testbin.Do(t, http.DefaultClient, http.MethodPost, p.URL+"/v1/systemone", twoQuestions(secret),
		"traceparent: 00-"+traceID+"-"+callerSpan+"-01")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	requestID := resp.Header.Get("X-Typesafe-Request-Id")
	feedbackTrace := callerTrace[:30] + "b2"
	if resp, body := testbin.Do(t, http.DefaultClient, http.MethodPost, p.URL+"/v1/feedback",
		`{"request_id":"`+requestID+`","question":"dept","outcome":"billing"}`, "traceparent: 00-"+feedbackTrace+"-"+callerSpan+"-01"); resp.StatusCode != http.StatusOK {
		t.Fatalf("feedback: %d %s", resp.StatusCode, body)
	}
	p.stop(t)

	fb := await(t, j, feedbackTrace, 2)
	if req, f := fb.Named("POST /v1/feedback"), fb.Named(tracing.SpanFeedback); len(req) != 1 || len(f) != 1 || f[0].Parent() != req[0].SpanID {
		t.Errorf("the feedback's trace: %+v", fb.Spans)
	} else {
		wantTags(t, f[0], map[string]any{
			string(tracing.AttrFeedbackOutcomes): float64(1),
			string(tracing.AttrFeedbackRecorded): float64(1),
		})
	}

	// 1 request + 2 questions + 2 attempts.
	got := await(t, j, traceID, 5)
	// The probes the test sent (GET /health, until the binary answered)
	// made no trace: Jaeger knows the service's request and feedback
	// operations alone.
	if ops := operations(t, j, service); slices.Contains(ops, "GET /health") || !slices.Contains(ops, "POST /v1/systemone") {
		t.Errorf("the service's operations in jaeger: %v", ops)
	}
	if len(got.Spans) != 5 {
		t.Fatalf("%d spans, want 5: %+v", len(got.Spans), got.Spans)
	}
	for _, s := range got.Spans {
		if p := got.Processes[s.ProcessID]; p.ServiceName != service {
			t.Errorf("span %s from service %q", s.OperationName, p.ServiceName)
		}
		for _, tag := range s.Tags {
			if v, ok := tag.Value.(string); ok && strings.Contains(v, secret) {
				t.Errorf("span %s carries the state in %s", s.OperationName, tag.Key)
			}
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
	wantTags(t, rs, map[string]any{
		"span.kind":                           "server",
		string(tracing.AttrHTTPRoute):         "/v1/systemone",
		string(tracing.AttrHTTPMethod):        "POST",
		string(tracing.AttrHTTPStatus):        float64(200),
		string(tracing.AttrRequestID):         requestID,
		string(tracing.AttrOpenInferenceKind): "CHAIN",
	})

	questionOf := map[string]string{} // span id -> question id
	for _, q := range got.Named(tracing.SpanQuestion) {
		if q.Parent() != rs.SpanID {
			t.Errorf("question span %s is not under the request", q.SpanID)
		}
		id, _ := q.Tag(string(tracing.AttrQuestionID))
		questionOf[q.SpanID] = fmt.Sprint(id)
		wantTags(t, q, map[string]any{
			string(tracing.AttrQuestionKind): "choice",
			string(tracing.AttrOutcome):      "answered",
		})
	}
	if ids := slices.Sorted(func(yield func(string) bool) {
		for _, id := range questionOf {
			if !yield(id) {
				return
			}
		}
	}); !slices.Equal(ids, []string{"dept", "tone"}) {
		t.Errorf("question spans for %v, want dept and tone", ids)
	}

	attempts := got.Named("decision " + fakeengine.DefaultModel)
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	var want []string
	for _, a := range attempts {
		if _, ok := questionOf[a.Parent()]; !ok {
			t.Errorf("attempt %s is not under a question", a.SpanID)
		}
		wantTags(t, a, map[string]any{
			"span.kind":                           "client",
			string(tracing.AttrGenAIOperation):    "decision",
			string(tracing.AttrGenAIRequestModel): fakeengine.DefaultModel,
			string(tracing.AttrGenAIProvider):     "llamacpp",
			string(tracing.AttrNode):              "engine",
			string(tracing.AttrOutcome):           "ok",
			string(tracing.AttrOpenInferenceKind): "DECISION",
		})
		if n, ok := a.Tag(string(tracing.AttrGenAIInputTokens)); !ok || n.(float64) <= 0 {
			t.Errorf("attempt %s: input tokens %v", a.SpanID, n)
		}
		if m, ok := a.Tag(string(tracing.AttrLabelMass)); !ok || !(m.(float64) > 0 && m.(float64) <= 1) {
			t.Errorf("attempt %s: label mass %v", a.SpanID, m)
		}
		want = append(want, "00-"+traceID+"-"+a.SpanID+"-01")
	}

	// Every attempt's inference call carried its traceparent. The
	// background probe's canary calls belong to no request and carry
	// none; an attempt whose call lost its traceparent still fails here,
	// since want then holds one more than sent.
	var sent []string
	for _, r := range e.Inferences() {
		if tp := r.Header.Get("traceparent"); tp != "" {
			sent = append(sent, tp)
		}
	}
	slices.Sort(want)
	slices.Sort(sent)
	if !slices.Equal(sent, want) {
		t.Errorf("the engine got traceparents\n%v\nwant\n%v", sent, want)
	}
}

// operations are the span names Jaeger holds for service (its query
// API's GET /api/services/{service}/operations).
func operations(t *testing.T, j *Jaeger, service string) []string {
	t.Helper()
	resp, body := testbin.Do(t, http.DefaultClient, http.MethodGet, j.Query+"/api/services/"+service+"/operations", "")
	var out struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("jaeger's operations of %s: %d %v: %s", service, resp.StatusCode, err, body)
	}
	return out.Data
}

// childCPU is the CPU a process has used, user and system, in
// nanoseconds (/proc's clock ticks: 10 ms, which a benchmark's thousands
// of requests make small).
func childCPU(b *testing.B, pid int) int64 {
	b.Helper()
	d, err := procstat.CPU(pid)
	if err != nil {
		b.Skipf("no /proc here: %v", err)
	}
	return d.Nanoseconds()
}

// BenchmarkBinary is one /v1/systemone request of 1 and of 8 questions
// through the real binary, in front of a fake llama-server that answers
// at once, with the caller's traceparent, tracing off and on side by
// side: what tracing costs system1 itself. On exports over OTLP/HTTP to
// a receiver in this process that counts the spans (spans/op, read once
// the binary has stopped and sent what it held). It reports system1's
// CPU per request (server-cpu-ns/op, from /proc: the client, the engine
// and the receiver are this process's, not the binary's), which a busy
// machine disturbs less than the clock.
func BenchmarkBinary(b *testing.B) {
	clearOTel(b)
	for _, n := range []int{1, 8} {
		for _, on := range []bool{false, true} {
			name := "off"
			if on {
				name = "on"
			}
			b.Run(fmt.Sprintf("questions=%d/%s", n, name), func(b *testing.B) {
				e := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
				b.Cleanup(e.Close)
				s := newSink(b)
				cfg := fmt.Sprintf("nodes:\n  - {name: engine, url: %s, dialect: llamacpp, models: [%s]}\ndecision_log: {off: true}\n", e.URL, fakeengine.DefaultModel)
				if on {
					cfg += fmt.Sprintf("tracing: {endpoint: %s, protocol: http/protobuf}\n", s.URL)
				}
				p := serveBinary(b, cfg)
				body := manyQuestions(n)
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				defer client.CloseIdleConnections()
				ask := func() {
					req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/systemone", strings.NewReader(body))
					req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("%d", resp.StatusCode)
					}
				}
				ask() // the first request learns the labels' tokens
				cpu := childCPU(b, p.cmd.Process.Pid)
				for b.Loop() {
					ask()
				}
				b.ReportMetric(float64(childCPU(b, p.cmd.Process.Pid)-cpu)/float64(b.N), "server-cpu-ns/op")
				p.stop(b)
				b.ReportMetric(float64(s.spans.Load())/float64(b.N+1), "spans/op")
			})
		}
	}
}

// manyQuestions is a /v1/systemone request of n choices of 3 options over
// one state.
func manyQuestions(n int) string {
	qs := make([]string, n)
	for i := range qs {
		qs[i] = fmt.Sprintf(`"q%d":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}}`, i)
	}
	return fmt.Sprintf(`{"model":%q,"state":"a ticket about a refund","questions":{%s}}`, fakeengine.DefaultModel, strings.Join(qs, ","))
}
