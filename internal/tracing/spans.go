package tracing

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"system1/internal/decision"
)

// tracerKey is the context key under which a root span leaves its Tracer
// for the spans below it.
type tracerKey struct{}

// noSpan is what every Start returns when tracing is off: it records
// nothing, and ending it ends nobody else's span.
var noSpan = trace.SpanFromContext(context.Background())

// from is the Tracer a root span left in ctx, nil when tracing is off.
func from(ctx context.Context) *Tracer {
	t, _ := ctx.Value(tracerKey{}).(*Tracer)
	return t
}

// root starts a root-level span: a child of whatever span ctx holds (the
// caller's, for a request), with t left in the context for those below.
func (t *Tracer) root(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx = context.WithValue(ctx, tracerKey{}, t)
	return t.tracer.Start(ctx, name, opts...)
}

// StartRequest starts the server span of an HTTP request, the child of
// the caller's traceparent when it sent one (with its baggage), named by
// its method until EndRequest knows its route. requestID is system1's id
// for it, as the wire's request-id header carries it.
func (t *Tracer) StartRequest(ctx context.Context, r *http.Request, requestID string) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, noSpan
	}
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return t.root(ctx, methodName(r.Method), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		AttrHTTPMethod.String(methodName(r.Method)),
		AttrURLPath.String(text(r.URL.Path)),
		AttrURLScheme.String(scheme),
		AttrRequestID.String(requestID),
		AttrOpenInferenceKind.String(KindChain),
	))
}

// EndRequest names the request's span by the route that served it (r's
// Pattern, as the ServeMux set it, "METHOD /path"), records the status it
// was answered with, and ends it. A status of 500 or more is an error.
func EndRequest(span trace.Span, r *http.Request, status int) {
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, AttrHTTPStatus.Int(status))
	if route := routeOf(r.Pattern); route != "" {
		span.SetName(methodName(r.Method) + " " + route)
		attrs = append(attrs, AttrHTTPRoute.String(route))
	}
	if status >= 500 {
		// HTTP's conventions: the status code is the error's type.
		attrs = append(attrs, AttrErrorType.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.SetAttributes(attrs...)
	span.End()
}

// routeOf is a ServeMux pattern's path, as a route is written (the
// OpenAPI document's): "POST /v1/systemone" and "host/v1/x" give
// "/v1/systemone" and "/v1/x", "GET /{$}" gives "/", and a wildcard's
// "..." and the mux's "{$}" are dropped ("/v1/models/{id...}" gives
// "/v1/models/{id}").
func routeOf(pattern string) string {
	if _, p, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimLeft(p, " \t")
	}
	i := strings.IndexByte(pattern, '/')
	if i < 0 {
		return ""
	}
	route := strings.TrimSuffix(pattern[i:], "{$}")
	return strings.Replace(route, "...}", "}", 1)
}

// methodName is an HTTP method as a span may name it: the standard ones
// as they are, any other _OTHER, as the HTTP conventions say (a caller's
// made-up method is not a name to index).
func methodName(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// StartCall starts the root span of work a face does that is not an HTTP
// request (an MCP tool call over stdio, a CLI command), named name.
func (t *Tracer) StartCall(ctx context.Context, name string) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, noSpan
	}
	return t.root(ctx, text(name), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(AttrOpenInferenceKind.String(KindChain)))
}

// EndCall ends the root span StartCall opened, an error when err is not
// nil.
func EndCall(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	end(span, "error", err)
}

// StartRefit starts the span of one refit from the decision log: a root
// of its own when ctx holds no span, as in the background loop.
func (t *Tracer) StartRefit(ctx context.Context) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, noSpan
	}
	return t.root(ctx, SpanRefit)
}

// EndRefit records what a refit came to (the buckets it weighed, how
// many fits it adopted, the fits' new revision, "" when none) and ends
// its span.
func EndRefit(span trace.Span, buckets, adopted int, revision string, err error) {
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{AttrRefitBuckets.Int(buckets), AttrRefitAdopted.Int(adopted)}
	if revision != "" {
		attrs = append(attrs, AttrRefitRevision.String(revision))
	}
	end(span, "error", err, attrs...)
}

// StartQuestion starts the span of one question of the request in ctx:
// its id, kind and number of options, never its text.
func StartQuestion(ctx context.Context, q decision.Question) (context.Context, trace.Span) {
	t := from(ctx)
	if t == nil {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, SpanQuestion, trace.WithAttributes(
		AttrQuestionID.String(text(q.ID)),
		AttrQuestionKind.String(text(string(q.Kind))),
		AttrQuestionOptions.Int(len(q.Options)),
		AttrOpenInferenceKind.String(KindChain),
	))
}

// EndQuestion records a question's outcome (answered, abstained, failed:
// the caller's word) and ends its span; err, when not nil, marks it an
// error.
func EndQuestion(span trace.Span, outcome string, err error) {
	if !span.IsRecording() {
		return
	}
	end(span, outcome, err, AttrOutcome.String(outcome))
}

// Questions are the spans StartQuestions opened, one per question of a
// request; a nil *Questions (tracing off) ends nothing.
type Questions struct {
	spans []trace.Span
	byID  map[string]int
}

// questionsKey is the context key of a request's Questions.
type questionsKey struct{}

// StartQuestions starts the span of each of the request's questions,
// as StartQuestion does, and returns a context that holds them all: for
// code that handles several questions with one context (the fleet asks a
// node all the questions it takes at once), ForQuestion then puts each
// attempt under its own question. End each with End.
func StartQuestions(ctx context.Context, qs []decision.Question) (context.Context, *Questions) {
	t := from(ctx)
	if t == nil {
		return ctx, nil
	}
	q := &Questions{spans: make([]trace.Span, len(qs)), byID: make(map[string]int, len(qs))}
	for i, question := range qs {
		_, q.spans[i] = StartQuestion(ctx, question)
		if _, dup := q.byID[question.ID]; !dup {
			q.byID[question.ID] = i
		}
	}
	return context.WithValue(ctx, questionsKey{}, q), q
}

// End records the outcome of question i (in the order given to
// StartQuestions) and ends its span, as EndQuestion does.
func (q *Questions) End(i int, outcome string, err error) {
	if q == nil || i < 0 || i >= len(q.spans) {
		return
	}
	EndQuestion(q.spans[i], outcome, err)
}

// ForQuestion is ctx with the span of question id (opened by
// StartQuestions) as its current span, so that StartAttempt puts an
// attempt under its question; ctx itself when tracing is off or the id is
// not one of them.
func ForQuestion(ctx context.Context, id string) context.Context {
	q, _ := ctx.Value(questionsKey{}).(*Questions)
	if q == nil {
		return ctx
	}
	i, ok := q.byID[id]
	if !ok {
		return ctx
	}
	return trace.ContextWithSpan(ctx, q.spans[i])
}

// StartAttempt starts the client span of one engine attempt: node is the
// node's name, model the model asked for, dialect the API the node
// speaks (llamacpp, ollama, openai, systemone), which is what
// gen_ai.provider.name and decision.system say of it.
func StartAttempt(ctx context.Context, node, model, dialect string) (context.Context, trace.Span) {
	t := from(ctx)
	if t == nil {
		return ctx, noSpan
	}
	node, model, dialect = text(node), text(model), text(dialect)
	return t.tracer.Start(ctx, OperationDecision+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		AttrGenAIOperation.String(OperationDecision),
		AttrGenAIProvider.String(dialect),
		AttrGenAIRequestModel.String(model),
		AttrOpenInferenceKind.String(KindDecision),
		AttrDecisionSystem.String(dialect),
		AttrDecisionProvider.String(node),
		AttrDecisionModel.String(model),
		AttrDecisionRequestModel.String(model),
		AttrNode.String(node),
		AttrDialect.String(dialect),
	))
}

// Attempt is what an engine attempt came to.
type Attempt struct {
	// Outcome is the attempt's result in the fleet's words (its
	// Attempt.Outcome): ok, or the failure's kind (unavailable, timeout,
	// rate_limited, malformed, rejected, busy, canceled).
	Outcome string
	// InputTokens and OutputTokens are the engine's counts; both 0 is
	// "not reported" and records neither.
	InputTokens, OutputTokens int
	// LabelMass is the probability the engine put on the option labels,
	// NaN where it cannot know (fleet.Report's convention); recorded only
	// for an attempt without Err.
	LabelMass float64
	// ResponseModel is the model that answered, when the engine named one
	// other than the model asked (a System One upstream's resolved
	// version).
	ResponseModel string
	// Err is the attempt's failure, nil when it answered.
	Err error
}

// EndAttempt records an attempt's outcome, tokens and label mass and
// ends its span.
func EndAttempt(span trace.Span, a Attempt) {
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, AttrOutcome.String(a.Outcome))
	if a.InputTokens > 0 || a.OutputTokens > 0 {
		attrs = append(attrs,
			AttrGenAIInputTokens.Int(a.InputTokens), AttrGenAIOutputTokens.Int(a.OutputTokens),
			AttrDecisionInputTokens.Int(a.InputTokens), AttrDecisionOutputTokens.Int(a.OutputTokens))
	}
	if a.Err == nil && a.LabelMass >= 0 && a.LabelMass <= 1 { // not NaN
		attrs = append(attrs, AttrLabelMass.Float64(a.LabelMass))
	}
	if a.ResponseModel != "" {
		m := text(a.ResponseModel)
		attrs = append(attrs, AttrGenAIResponseModel.String(m), AttrDecisionResponseModel.String(m))
	}
	end(span, a.Outcome, a.Err, attrs...)
}

// StartFeedback starts the span of a feedback call carrying outcomes
// outcomes.
func StartFeedback(ctx context.Context, outcomes int) (context.Context, trace.Span) {
	t := from(ctx)
	if t == nil {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, SpanFeedback, trace.WithAttributes(AttrFeedbackOutcomes.Int(outcomes)))
}

// EndFeedback records how many outcomes were recorded and ends the span.
func EndFeedback(span trace.Span, recorded int, err error) {
	if !span.IsRecording() {
		return
	}
	end(span, "error", err, AttrFeedbackRecorded.Int(recorded))
}

// end sets span's closing attributes, marks it an error of type kind
// when err is not nil, and ends it. The status carries err's text, as the
// log line does. The attributes go in one call: the SDK copies a span's
// attributes on each.
func end(span trace.Span, kind string, err error, attrs ...attribute.KeyValue) {
	if err != nil {
		attrs = append(attrs, AttrErrorType.String(cmp.Or(kind, "error")))
		span.SetStatus(codes.Error, text(err.Error()))
	}
	span.SetAttributes(attrs...)
	span.End()
}

// MaxStateBytes bounds the state SetState puts on a span; a longer one
// is cut at a character's edge and marked system1.state.truncated.
const MaxStateBytes = 16 << 10

// SetState puts a request's state (its JSON, as the caller sent it) on
// the current span of ctx as input.value, when the tracing block's
// include_state is on; otherwise it does nothing, so that no caller's
// data leaves in a span unless the operator asked for it.
func SetState(ctx context.Context, state []byte) {
	t := from(ctx)
	if t == nil || !t.includeState {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	whole := strings.ToValidUTF8(string(state), "\uFFFD")
	s := cut(whole, MaxStateBytes)
	span.SetAttributes(AttrInputValue.String(s), AttrInputMIMEType.String("application/json"))
	if len(s) < len(whole) {
		span.SetAttributes(AttrStateTruncated.Bool(true))
	}
}

// maxText bounds a caller's or an engine's string on a span (a path, a
// question's id, a model's name, a failure's text).
const maxText = 1024

// text makes s fit for a span: valid UTF-8, because OTLP's strings must
// be and an exporter that meets one invalid string drops its whole batch,
// every request's spans with it; and at most maxText bytes.
func text(s string) string {
	if len(s) <= maxText && utf8.ValidString(s) {
		return s
	}
	return cut(strings.ToValidUTF8(s, "\uFFFD"), maxText)
}

// cut shortens s to at most n bytes at a character's edge.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Inject writes the current span of ctx into h as traceparent (and
// tracestate and baggage, when the caller sent them), for an engine
// call: the engine's own tracing then continues the caller's trace. It
// writes nothing when tracing is off.
func Inject(ctx context.Context, h http.Header) {
	if t := from(ctx); t != nil {
		t.prop.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
