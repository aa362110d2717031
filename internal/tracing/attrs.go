package tracing

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// The attribute names system1's spans carry, in one place: OpenTelemetry's
// semantic conventions (HTTP and GenAI, release 1.37, the last of the Go
// packages to carry GenAI's names) where they name the thing, OpenInference's
// decision-span names beside them (a decision model is not a language
// model, so OpenInference gives it its own decision.* names), and
// system1's own under system1.*.
const (
	// HTTP (server spans).
	AttrHTTPMethod = semconv.HTTPRequestMethodKey      // http.request.method
	AttrHTTPRoute  = semconv.HTTPRouteKey              // http.route
	AttrHTTPStatus = semconv.HTTPResponseStatusCodeKey // http.response.status_code
	AttrURLPath    = semconv.URLPathKey                // url.path
	AttrURLScheme  = semconv.URLSchemeKey              // url.scheme
	AttrErrorType  = semconv.ErrorTypeKey              // error.type

	// GenAI (engine attempts).
	AttrGenAIOperation     = semconv.GenAIOperationNameKey     // gen_ai.operation.name
	AttrGenAIProvider      = semconv.GenAIProviderNameKey      // gen_ai.provider.name
	AttrGenAIRequestModel  = semconv.GenAIRequestModelKey      // gen_ai.request.model
	AttrGenAIResponseModel = semconv.GenAIResponseModelKey     // gen_ai.response.model
	AttrGenAIInputTokens   = semconv.GenAIUsageInputTokensKey  // gen_ai.usage.input_tokens
	AttrGenAIOutputTokens  = semconv.GenAIUsageOutputTokensKey // gen_ai.usage.output_tokens

	// OpenInference: the span kind every OpenInference span carries, the
	// decision span's model and token names, and the input (the state,
	// only when include_state is on).
	AttrOpenInferenceKind     attribute.Key = "openinference.span.kind"
	AttrDecisionSystem        attribute.Key = "decision.system"
	AttrDecisionProvider      attribute.Key = "decision.provider"
	AttrDecisionModel         attribute.Key = "decision.model_name"
	AttrDecisionRequestModel  attribute.Key = "decision.request.model_name"
	AttrDecisionResponseModel attribute.Key = "decision.response.model_name"
	AttrDecisionInputTokens   attribute.Key = "decision.token_count.input"
	AttrDecisionOutputTokens  attribute.Key = "decision.token_count.output"
	AttrInputValue            attribute.Key = "input.value"
	AttrInputMIMEType         attribute.Key = "input.mime_type"

	// system1's own.
	AttrRequestID        attribute.Key = "system1.request_id"
	AttrNode             attribute.Key = "system1.node"
	AttrDialect          attribute.Key = "system1.dialect"
	AttrOutcome          attribute.Key = "system1.outcome"
	AttrLabelMass        attribute.Key = "system1.label_mass"
	AttrQuestionID       attribute.Key = "system1.question.id"
	AttrQuestionKind     attribute.Key = "system1.question.kind"
	AttrQuestionOptions  attribute.Key = "system1.question.options"
	AttrFeedbackOutcomes attribute.Key = "system1.feedback.outcomes"
	AttrFeedbackRecorded attribute.Key = "system1.feedback.recorded"
	AttrRefitBuckets     attribute.Key = "system1.refit.buckets"
	AttrRefitAdopted     attribute.Key = "system1.refit.adopted"
	AttrRefitRevision    attribute.Key = "system1.refit.revision"
	AttrStateTruncated   attribute.Key = "system1.state.truncated"
)

// Values of the attributes above that system1 sets itself.
const (
	// OperationDecision is gen_ai.operation.name on an engine attempt: the
	// GenAI conventions have no operation for a decision model, and this
	// is the name decision-model instrumentations use.
	OperationDecision = "decision"
	// KindDecision and KindChain are openinference.span.kind's values for
	// an engine attempt and for the request and question around it.
	KindDecision = "DECISION"
	KindChain    = "CHAIN"
)

// Span names. A request's is "METHOD route" (HTTP's convention, set when
// it ends); an attempt's "decision MODEL" (GenAI's "operation model").
const (
	SpanQuestion = "question"
	SpanFeedback = "feedback"
	SpanRefit    = "refit"
)
