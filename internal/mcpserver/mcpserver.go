// Package mcpserver is the System 1 gateway's MCP face: the tools named
// in Tools over the official Go SDK. Every result carries its whole
// answer as structuredContent (Claude Code shows the model only that),
// validated against the tool's output schema before it is sent.
package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/gateway"
	"system1/internal/outcomes"
	"system1/internal/tracing"
)

// Tool names.
const (
	ToolDecide       = "system1_decide"
	ToolHealth       = "system1_health"
	ToolCapabilities = "system1_capabilities"
	ToolFeedback     = "system1_feedback"
)

// Tools are the tools the server lists, in order: the one home of their
// names. The plugin's manifest, its stand-in server
// (scripts/system1-building), docs/plugin.md and the README name them
// too, and TestToolNamesHaveOneHome fails when one of them differs.
var Tools = []string{ToolDecide, ToolHealth, ToolCapabilities, ToolFeedback}

const decideDescription = `Ask System 1, a fast calibrated decision model, for one quick judgement: pick one of "options" (or answer yes or no when no options are given), about an optional "context" object. ` +
	`Use it for classify / route / pick / yes-no calls where a fast intuition is enough; not for open-ended questions, writing, or facts beyond the question and context. ` +
	`The result is JSON. status "decided": "decision" is one of the options and "confidence" is its probability. ` +
	`status "abstained": there is no decision (System 1 is unsure, paused by the user, or the model declined); "rationale" says why, and you should reason it through yourself. ` +
	`status "error": no decision; "error.code" is invalid_request (fix the request), config_error, provider_timeout, provider_error or malformed_response; reason it through yourself. ` +
	`"grade" says what to do with an answer: act (act on the decision), ask (it is near the bar or two options are close: ask the user which, showing the top options), escalate (do not act on it: reason it through yourself or hand it on); "gate" is the bar it was graded against: the one the calibration fits suggest from outcomes where they do, else the threshold. ` +
	`"none_option": true adds an implicit "none of these" option for when none of yours may fit; "label_mass" (when not null) is how much the model saw its answer among the options at all. ` +
	`"min_confidence" (0 to 1) raises or lowers the bar for deciding. ` +
	`"coverage" (0.5 to 0.99) asks for a prediction set: "prediction_set" is the options that hold the right one that often, from past outcomes; grade act then needs a set of the decision alone, and "set_note" says why there is no set.`

const healthDescription = `Check whether System 1 is usable: status ok, degraded (some of the primary provider's nodes are down and the others answer, or the primary is down and a fallback answers), down, or paused (the user turned it off with /system1:toggle off), ` +
	`with a probe of each provider (no user data is sent), each node's state (healthy or cooling down and why, its errors, failovers and cooldowns, and whether it holds its constraint of the answer to the option labels), and any configuration errors.`

const capabilitiesDescription = `Describe System 1: the provider chain and what each provider takes (max_options), the confidence threshold, timeouts, calibration fits, ` +
	`and the full JSON Schemas of system1_decide's request and response.`

const feedbackDescription = `Tell System 1 what turned out right for an earlier system1_decide result, so that its confidence stays honest: ` +
	`call it when you learn the outcome (the user overrode the decision, the tests failed, the ticket was re-routed). ` +
	`"request_id" is the decide result's request_id; "outcome" is the option that was right (yes or no for a yes/no question), or "none" when none of the options was. ` +
	`The latest outcome for a decision wins. The result lists what was recorded, or "error" (code unknown_request for an unknown request_id, ` +
	`invalid_request with "param" naming the field at fault: request_id, question or outcome; log_off when the decision log is off, log_error when it failed to write; on any error nothing was recorded).`

const instructions = `System 1 gives fast, calibrated decisions among options (or yes/no) through system1_decide. ` +
	`Follow a result's "grade": "act", act on its decision; "ask", ask the user which of the top options; "escalate", reason the question through yourself, as on a result without a grade (paused, or an error).`

// Wording is how the gateway's texts name this face's tools and the
// plugin's toggle; cmd/system1 builds the MCP server's gateway with it.
var Wording = gateway.Wording{Decide: ToolDecide, Health: ToolHealth, Off: "/system1:toggle off", On: "/system1:toggle on"}

// Options configure the server.
type Options struct {
	Gateway *gateway.Gateway
	// Feedback records what system1_feedback reports; nil answers that
	// the decision log is off.
	Feedback *outcomes.Feedback
	// Log gets the server's own lines; every line carries a request_id
	// ("-" when there is no request).
	Log *slog.Logger
	// Tracer traces each tool call as a root span, "mcp" and the tool's
	// name (internal/tracing); nil traces nothing.
	Tracer  *tracing.Tracer
	Version string
}

// New builds the MCP server. It contacts no provider: that happens on the
// first tool call.
func New(o Options) *mcp.Server {
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	s := mcp.NewServer(&mcp.Implementation{Name: "system1", Title: "System 1", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       o.Log.With("request_id", "-"),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	g := o.Gateway
	open := true
	add(s, o.Log, o.Tracer, &mcp.Tool{
		Name:        ToolDecide,
		Title:       "System 1: decide",
		Description: decideDescription,
		// The loose schema: the handler checks every request itself, so a
		// bad one gets a structured invalid_request naming each problem.
		InputSchema: loose(gateway.RequestSchema()),
		Annotations: &mcp.ToolAnnotations{Title: "System 1: decide", ReadOnlyHint: true, OpenWorldHint: &open},
	}, gateway.WithoutDialect(gateway.ResponseSchema()), func(ctx context.Context, args json.RawMessage) (any, bool) {
		res := g.Decide(ctx, args, "")
		return res, res.Status == gateway.Failed
	})
	add(s, o.Log, o.Tracer, statusTool(ToolHealth, "System 1: health", healthDescription),
		gateway.HealthSchema(), func(ctx context.Context, _ json.RawMessage) (any, bool) {
			return g.Health(ctx), false
		})
	add(s, o.Log, o.Tracer, statusTool(ToolCapabilities, "System 1: capabilities", capabilitiesDescription),
		gateway.CapabilitiesSchema(), func(ctx context.Context, _ json.RawMessage) (any, bool) {
			c := g.Capabilities(ctx)
			c.Tools = append([]string{}, Tools...)
			return c, false
		})
	add(s, o.Log, o.Tracer, &mcp.Tool{
		Name:        ToolFeedback,
		Title:       "System 1: feedback",
		Description: feedbackDescription,
		InputSchema: gateway.FeedbackInputSchema(),
		Annotations: &mcp.ToolAnnotations{Title: "System 1: feedback", IdempotentHint: false, OpenWorldHint: new(bool)},
	}, gateway.FeedbackSchema(), func(ctx context.Context, args json.RawMessage) (any, bool) {
		items, res := outcomes.ParseFeedback(args)
		if res == nil {
			res = o.Feedback.Record(ctx, items)
		}
		return res, res.Error != nil
	})
	return s
}

// statusTool is a tool without arguments that reads the gateway's state
// and changes nothing: health and capabilities.
func statusTool(name, title, description string) *mcp.Tool {
	open := true
	ann := &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &open}
	return &mcp.Tool{Name: name, Title: title, Description: description, InputSchema: &jsonschema.Schema{Type: "object"}, Annotations: ann}
}

// errToolError is what a tool call's span records of a call whose result
// is an error (isError).
var errToolError = errors.New("the tool answered an error")

// add registers a tool whose handler returns a value for
// structuredContent (and whether the call is an error). The value is
// checked against the output schema before it is sent, as the SDK's typed
// tools do; the arguments reach the handler unchecked.
func add(s *mcp.Server, log *slog.Logger, tr *tracing.Tracer, t *mcp.Tool, out *jsonschema.Schema, h func(context.Context, json.RawMessage) (any, bool)) {
	out = singleTyped(out)
	if in, ok := t.InputSchema.(*jsonschema.Schema); ok {
		t.InputSchema = singleTyped(in)
	}
	resolved, err := out.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: output schema of %s: %v", t.Name, err)) // our own schema: a bug
	}
	t.OutputSchema = out
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (_ *mcp.CallToolResult, err error) {
		ctx, span := tr.StartCall(ctx, "mcp "+t.Name)
		var isErr bool
		defer func() {
			failed := err
			if failed == nil && isErr {
				failed = errToolError
			}
			tracing.EndCall(span, failed)
		}()
		v, isErr := h(ctx, req.Params.Arguments)
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: marshaling the result: %w", t.Name, err)
		}
		var generic any
		if err := json.Unmarshal(data, &generic); err != nil {
			return nil, err
		}
		if err := resolved.Validate(generic); err != nil {
			log.Error("result fails the output schema", "request_id", "-", "tool", t.Name, "err", err)
			return nil, fmt.Errorf("%s: the result fails the output schema: %w", t.Name, err)
		}
		return &mcp.CallToolResult{
			StructuredContent: json.RawMessage(data),
			Content:           []mcp.Content{&mcp.TextContent{Text: string(data)}},
			IsError:           isErr,
		}, nil
	})
}

// loose returns a copy of s that a server can declare as a tool's input
// schema without the SDK enforcing it: no additionalProperties:false and
// no required list, so that the handler sees every request and can answer
// a bad one with a structured invalid_request naming every problem.
func loose(s *jsonschema.Schema) *jsonschema.Schema {
	c := s.CloneSchemas()
	c.AdditionalProperties, c.Required, c.Schema = nil, nil, ""
	return c
}
