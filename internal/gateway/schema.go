package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fleet"
	"system1/internal/outcomes"
)

// The published schemas are derived from the Go types above: jsonschema-go
// infers the shape (field names, types, required fields, descriptions from
// the jsonschema tags), and constrain adds what Go types cannot say
// (lengths, ranges, enums). Arrays are plain "array" types, and optional
// fields are not nullable: they are left out instead. Only decision,
// provider and error are nullable, since the contract says they are null.

// draft is the JSON Schema dialect of the published files.
const draft = "https://json-schema.org/draft/2020-12/schema"

// WithoutDialect returns a copy of s without $schema, for a document that
// names its own dialect: an MCP tool's output (the SDK and clients validate
// with theirs) or an OpenAPI component.
func WithoutDialect(s *jsonschema.Schema) *jsonschema.Schema {
	c := s.CloneSchemas()
	c.Schema = ""
	return c
}

// notBlank is the pattern of a text ParseRequest refuses when blank:
// one character that is not a space (as ECMAScript and Go read \S).
const notBlank = `\S`

// RequestSchema is the decide request's schema (schema/request.json).
func RequestSchema() *jsonschema.Schema {
	s := infer[Request]()
	s.Schema, s.Title = draft, "system1 decide request, schema version "+SchemaVersion
	s.Description = "One decision for System 1 to make: a question, optionally the options to choose from and a context object."
	p := s.Properties
	p["question"].MinLength, p["question"].MaxLength = new(1), new(MaxQuestionChars)
	p["question"].Pattern = notBlank
	p["options"].MinItems, p["options"].MaxItems, p["options"].UniqueItems = new(MinOptions), new(MaxOptions), true
	p["options"].Items.MinLength, p["options"].Items.MaxLength = new(1), new(MaxOptionChars)
	p["options"].Items.Pattern = notBlank
	unit(p["min_confidence"])
	// What ParseRequest refuses, the schema says: a value it allowed is
	// not refused.
	unit(p["min_label_mass"])
	p["debias"].Enum = []any{decision.DebiasPermute, decision.DebiasOff}
	p["prior"].Enum = []any{decision.PriorBatch, decision.PriorContentFree, decision.PriorOff}
	p["coverage"].Minimum, p["coverage"].Maximum = new(calibration.MinCoverage), new(calibration.MaxCoverage)
	p["request_id"].MinLength, p["request_id"].MaxLength = new(1), new(decisionlog.MaxRequestIDChars)
	p["schema_version"].Enum = []any{SchemaVersion}
	return s
}

// ResponseSchema is the decide response's schema (schema/response.json).
func ResponseSchema() *jsonschema.Schema {
	s := infer[Response]()
	s.Schema, s.Title = draft, "system1 decide response, schema version "+SchemaVersion
	s.Description = "System 1's answer: a decision with its probability, or an abstention or error that says why."
	p := s.Properties
	p["status"].Enum = []any{Decided, Abstained, Failed}
	unit(p["confidence"])
	unit(p["threshold"])
	unit(p["probabilities"].AdditionalProperties)
	p["set_coverage"].Minimum, p["set_coverage"].Maximum = new(calibration.MinCoverage), new(calibration.MaxCoverage)
	p["set_outcomes"].Minimum = new(0.0)
	p["latency_ms"].Minimum = new(0.0)
	a := p["attempts"].Items.Properties
	a["outcome"].Enum = []any{OutcomeOK, OutcomeAbstained, OutcomeTimeout, OutcomeError, OutcomeMalformed, OutcomeSkipped}
	a["latency_ms"].Minimum = new(0.0)
	p["error"].Properties["code"].Enum = []any{CodeInvalidRequest, CodeConfigError, CodeProviderTimeout, CodeProviderError, CodeMalformed, CodeUnauthorized, CodeForbidden, CodeRateLimited, CodeOverBudget}
	p["schema_version"].Enum = []any{SchemaVersion}
	p["cache"].Enum = anys(CacheStates)
	return s
}

// HealthSchema is system1_health's output schema.
func HealthSchema() *jsonschema.Schema {
	s := infer[Health]()
	s.Properties["status"].Enum = []any{HealthOK, HealthDegraded, HealthDown, HealthPaused}
	s.Properties["providers"].Items.Properties["role"].Enum = []any{RolePrimary, RoleFallback}
	s.Properties["nodes"].Items.Properties["constraint"].Properties["state"].Enum = anys(fleet.ConstraintStates)
	return s
}

// CapabilitiesSchema is system1_capabilities' output schema.
func CapabilitiesSchema() *jsonschema.Schema {
	s := infer[Capabilities]()
	unit(s.Properties["threshold"])
	return s
}

// MarshalSchema writes a schema as the published files are written:
// indented, with a final newline.
func MarshalSchema(s *jsonschema.Schema) []byte {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("gateway: schema does not marshal: %v", err)) // built from our own types: a bug
	}
	return append(b, '\n')
}

func infer[T any]() *jsonschema.Schema {
	probs := &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{Type: "number"}}
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {Type: "object"},
		reflect.TypeFor[Probabilities]():   probs,
	}})
	if err != nil {
		panic(fmt.Sprintf("gateway: inferring the schema of %T: %v", *new(T), err)) // our own types: a bug
	}
	plain(s)
	return s
}

// plain makes every array a plain "array" and drops "null" from optional
// properties, recursively.
func plain(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if slices.Contains(s.Types, "array") {
		s.Types, s.Type = nil, "array"
	}
	for name, p := range s.Properties {
		if !slices.Contains(s.Required, name) && len(p.Types) == 2 && slices.Contains(p.Types, "null") {
			t := p.Types[0]
			if t == "null" {
				t = p.Types[1]
			}
			p.Types, p.Type = nil, t
		}
		plain(p)
	}
	plain(s.Items)
	plain(s.AdditionalProperties)
}

func unit(s *jsonschema.Schema) { s.Minimum, s.Maximum = new(0.0), new(1.0) }

// schemaJSON is a schema as a JSON object, for capabilities.
func schemaJSON(s *jsonschema.Schema) json.RawMessage {
	return json.RawMessage(bytes.TrimSpace(MarshalSchema(s)))
}

// SchemaFiles are the published schema files by name, as schemagen writes
// them into schema/.
func SchemaFiles() map[string][]byte {
	return map[string][]byte{
		"request.json":        MarshalSchema(RequestSchema()),
		"response.json":       MarshalSchema(ResponseSchema()),
		"batch-request.json":  MarshalSchema(BatchRequestSchema()),
		"batch-response.json": MarshalSchema(BatchResponseSchema()),
	}
}

// BatchRequestSchema is a decide batch's schema
// (schema/batch-request.json): the decide request with contexts, 1 to
// MaxBatchContexts context objects, in place of its context and its
// request_id.
func BatchRequestSchema() *jsonschema.Schema {
	s := RequestSchema()
	s.Title = "system1 decide batch request, schema version " + SchemaVersion
	s.Description = "One decision for System 1 to make over each of many contexts (POST /v1/decide/batch): a decide request whose context is given as contexts."
	p := s.Properties
	ctx := p["context"]
	ctx.Description = fmt.Sprintf("One context: facts the decision depends on, as a JSON object (at most %d KiB); passed to the model as the state.", MaxContextBytes>>10)
	p["contexts"] = &jsonschema.Schema{Type: "array", Items: ctx, MinItems: new(1), MaxItems: new(MaxBatchContexts),
		Description: fmt.Sprintf("The contexts, 1 to %d, each decided as a decide request with that context.", MaxBatchContexts)}
	delete(p, "context")
	delete(p, "request_id")
	s.Required = append(s.Required, "contexts")
	return s
}

// BatchResponseSchema is a decide batch's answer's schema
// (schema/batch-response.json).
func BatchResponseSchema() *jsonschema.Schema {
	s := infer[BatchResponse]()
	s.Schema, s.Title = draft, "system1 decide batch response, schema version "+SchemaVersion
	s.Description = "One decide response per context, in order, or why the batch was refused."
	one := ResponseSchema()
	one.Schema, one.Title = "", ""
	s.Properties["results"].Items = one
	s.Properties["error"].Properties["code"].Enum = []any{CodeInvalidRequest, CodeUnauthorized, CodeForbidden, CodeRateLimited, CodeOverBudget}
	s.Properties["schema_version"].Enum = []any{SchemaVersion}
	return s
}

// FeedbackInputSchema is system1_feedback's input: one outcome.
func FeedbackInputSchema() *jsonschema.Schema {
	s := infer[outcomes.FeedbackItem]()
	p := s.Properties
	p["request_id"].MinLength, p["request_id"].MaxLength = new(1), new(decisionlog.MaxRequestIDChars)
	desc := p["outcome"].Description
	p["outcome"] = &jsonschema.Schema{Description: desc, AnyOf: []*jsonschema.Schema{{Type: "string", MinLength: new(1)}, {Type: "boolean"}, {Type: "integer", Minimum: new(0.0), Maximum: new(float64(decisionlog.MaxOutcomeLevel))}}}
	s.Required = []string{"request_id", "outcome"}
	return s
}

// FeedbackSchema is the output schema of a feedback call.
func FeedbackSchema() *jsonschema.Schema {
	s := infer[outcomes.FeedbackResult]()
	s.Properties["error"].Properties["code"].Enum = []any{outcomes.FeedbackInvalid, outcomes.FeedbackUnknownRequest, outcomes.FeedbackLogOff, outcomes.FeedbackLogError}
	return s
}

// anys are xs as a schema's enum takes them.
func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
