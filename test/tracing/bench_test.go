package tracing_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"system1/cmd/system1/tracesdk"
	"system1/internal/tracing"
)

// sink is an OTLP/HTTP receiver in this process that counts the spans it
// is sent and keeps none: tracing on pays the SDK, the batching, the
// encoding and the export's HTTP, but no collector's work.
type sink struct {
	*httptest.Server
	spans atomic.Int64
}

func newSink(b *testing.B) *sink {
	s := &sink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var n int
		if err == nil {
			n, err = countSpans(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.spans.Add(int64(n))
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(s.Close)
	return s
}

// countSpans counts the spans of an OTLP ExportTraceServiceRequest by
// walking its wire format (resource_spans = 1, scope_spans = 2, spans =
// 2) without decoding them: the sink's own work stays small beside what
// it measures.
func countSpans(b []byte) (int, error) {
	spans := 0
	err := eachField(b, 1, func(rs []byte) error {
		return eachField(rs, 2, func(ss []byte) error {
			return eachField(ss, 2, func([]byte) error { spans++; return nil })
		})
	})
	return spans, err
}

// eachField calls f with each length-delimited field number num of the
// message b.
func eachField(b []byte, num protowire.Number, f func([]byte) error) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			if err := f(v); err != nil {
				return err
			}
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
	}
	return nil
}

// modes are tracing off (no endpoint: a nil Tracer), on and every trace
// kept, and on with every trace dropped by the sampler (propagation
// only).
var modes = []struct{ name, sampler string }{
	{"off", ""},
	{"on", "parentbased_always_on"},
	{"on_unsampled", "always_off"},
}

// setup turns tracing on towards s, or leaves it off.
func setup(b *testing.B, s *sink, sampler string) *tracing.Tracer {
	b.Helper()
	for _, k := range []string{tracesdk.EnvEndpoint, tracesdk.EnvTracesEndpoint, tracesdk.EnvProtocol, tracesdk.EnvTracesProtocol, tracesdk.EnvSampler, tracesdk.EnvSDKDisabled, tracesdk.EnvTracesExporter} {
		b.Setenv(k, "")
	}
	if sampler != "" {
		b.Setenv(tracesdk.EnvEndpoint, s.URL)
		b.Setenv(tracesdk.EnvProtocol, "http/protobuf")
		b.Setenv(tracesdk.EnvSampler, sampler)
	}
	tr, err := tracesdk.Setup(context.Background(), tracesdk.Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr
}

// report adds the spans the sink received per request, after the
// exporter sent what it held (on_unsampled and off: 0).
func report(b *testing.B, tr *tracing.Tracer, s *sink) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(s.spans.Load())/float64(b.N), "spans/op")
}

// cpuTime is the CPU this process has used, user and system, in
// nanoseconds: unlike the clock, it does not count the time other
// processes on a shared machine took from this one.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkRequest is one decision request with N questions over
// loopback HTTP, each question one engine call over loopback HTTP to a
// fake engine (the first fails over, one call more), tracing off and on
// side by side: what tracing adds to a request as a caller sees it. It
// reports the process's CPU per request too (cpu-ns/op: the client, the
// server, the fake engine, the exporter's goroutine and the sink), which
// a busy machine disturbs less than the clock.
func BenchmarkRequest(b *testing.B) {
	for _, n := range []int{1, 8} {
		for _, m := range modes {
			b.Run(fmt.Sprintf("questions=%d/%s", n, m.name), func(b *testing.B) {
				s := newSink(b)
				tr := setup(b, s, m.sampler)
				e := newEngine(b)
				srv := httptest.NewServer(wired(tr, e.call, questions(n)))
				defer srv.Close()
				client := srv.Client()
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cpuTime(b)
				for b.Loop() {
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/systemone", strings.NewReader(`{"state":"x"}`))
					req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
				report(b, tr, s)
			})
		}
	}
}
