package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"system1/internal/decision"
)

// wiring makes every call the wiring makes for one request of the
// questions qs, one engine attempt each (its headers h), and a feedback
// call.
func wiring(ctx context.Context, tr *Tracer, r *http.Request, h http.Header, qs []decision.Question) {
	ctx, span := tr.StartRequest(ctx, r, "id")
	SetState(ctx, []byte(`{}`))
	for _, q := range qs {
		qctx, qspan := StartQuestion(ctx, q)
		actx, aspan := StartAttempt(qctx, "node", "model", "llamacpp")
		Inject(actx, h)
		EndAttempt(aspan, Attempt{Outcome: "ok", InputTokens: 24, OutputTokens: 1, LabelMass: 0.9})
		EndQuestion(qspan, "answered", nil)
	}
	_, fs := StartFeedback(ctx, 1)
	EndFeedback(fs, 1, nil)
	EndRequest(span, r, 200)
}

func callerRequest() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/systemone", nil)
	r.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	r.Pattern = "POST /v1/systemone"
	return r
}

// Off, the wiring allocates nothing: a request costs what it cost
// before tracing existed, bar a few context lookups.
func TestOffAllocatesNothing(t *testing.T) {
	r, h, qs, ctx := callerRequest(), http.Header{}, questions(8), context.Background()
	all := func(tr *Tracer) {
		wiring(ctx, tr, r, h, qs)
		// The fleet's shape: all the questions at once, attempts by id.
		ctx, _ := tr.StartRequest(ctx, r, "id")
		qctx, spans := StartQuestions(ctx, qs)
		for i, q := range qs {
			_, aspan := StartAttempt(ForQuestion(qctx, q.ID), "node", "model", "llamacpp")
			EndAttempt(aspan, Attempt{Outcome: "ok"})
			spans.End(i, "answered", nil)
		}
		_, rs := tr.StartRefit(ctx)
		EndRefit(rs, 1, 1, "r", nil)
		_, cs := tr.StartCall(ctx, "mcp")
		cs.End()
	}
	for _, tr := range []*Tracer{nil, {}} {
		if n := testing.AllocsPerRun(100, func() { all(tr) }); n != 0 {
			t.Fatalf("off, a request of 8 questions allocates %v times", n)
		}
	}
	if len(h) != 0 {
		t.Fatalf("off, the engine would get %v", h)
	}
}

func questions(n int) []decision.Question {
	qs := make([]decision.Question, n)
	for i := range qs {
		qs[i] = decision.Question{ID: fmt.Sprint("q", i), Kind: decision.Choice, Options: make([]decision.Option, 3)}
	}
	return qs
}

// BenchmarkWiring is the instrumentation of one request of N questions
// alone, side by side: off (a nil Tracer), on with every trace kept, and
// on with every trace dropped by the sampler; on's spans go through the
// SDK's batch processor to an exporter that discards them, so this is
// the SDK's cost without the export's (test/tracing's BenchmarkRequest
// has that).
func BenchmarkWiring(b *testing.B) {
	for _, n := range []int{1, 8} {
		for _, m := range []struct {
			name    string
			sampler sdktrace.Sampler
		}{
			{"off", nil},
			{"on", sdktrace.ParentBased(sdktrace.AlwaysSample())},
			{"on_unsampled", sdktrace.NeverSample()},
		} {
			b.Run(fmt.Sprintf("questions=%d/%s", n, m.name), func(b *testing.B) {
				var tr *Tracer
				if m.sampler != nil {
					tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(m.sampler))
					defer tp.Shutdown(context.Background())
					tr = New(tp, "bench", false)
				}
				r, h, qs, ctx := callerRequest(), http.Header{}, questions(n), context.Background()
				b.ReportAllocs()
				for b.Loop() {
					wiring(ctx, tr, r, h, qs)
				}
			})
		}
	}
}
