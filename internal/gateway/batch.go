package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"system1/internal/answer"
	"system1/internal/jsonx"
)

// MaxBatchContexts is how many contexts one decide batch may carry: the
// System One batch's cap (systemone.MaxBatchStates, which a test holds
// this to).
const MaxBatchContexts = 64

// BatchResponse is a decide batch's answer (POST /v1/decide/batch): one
// decide response per context, in the contexts' order, or the batch's
// own error. Its JSON schema is published (schema/batch-response.json).
type BatchResponse struct {
	Results       []*Response `json:"results" jsonschema:"One decide response per context, in the contexts' order, each exactly what POST /v1/decide answers for the request with that context, with a request_id of its own. Empty when the batch was refused."`
	Error         *Error      `json:"error" jsonschema:"Null, or why the batch was refused as a whole (invalid_request; over HTTP also unauthorized, forbidden, rate_limited or over_budget): nothing was asked."`
	SchemaVersion string      `json:"schema_version" jsonschema:"The contract version: \"1\"."`
	RequestID     string      `json:"request_id" jsonschema:"The batch's own id, as x-typesafe-request-id gives it; each result has its own."`
}

// DecideBatch decides one question over many contexts: raw is a decide
// request whose context is given as contexts, 1 to MaxBatchContexts JSON
// objects. The batch is checked whole first, and refused with an
// invalid_request error naming each problem (a context's as
// contexts[i]) before anything is asked; then each context is decided
// exactly as Decide decides the request with that context alone (the
// pause, the chain, the gate, the grade and the record are each
// context's, under a request id of its own), as row-wise work
// (answer.Throughput), at most as many at once as the chain's first
// model runs with every slot busy. admitted, when not nil, is told how
// many contexts a batch that passed its checks holds, before any is
// asked: a face counts them against its caller's rate there.
func (g *Gateway) DecideBatch(ctx context.Context, raw []byte, id string, admitted func(n int)) *BatchResponse {
	bodies, problems := splitBatch(raw)
	if len(problems) > 0 {
		msg := strings.Join(problems, "; ")
		g.log.Info("decide batch", "request_id", id, "error", CodeInvalidRequest, "message", msg)
		return RefusedBatch(id, CodeInvalidRequest, msg)
	}
	if admitted != nil {
		admitted(len(bodies))
	}
	out := &BatchResponse{Results: make([]*Response, len(bodies)), SchemaVersion: SchemaVersion, RequestID: id}
	decide := func(ctx context.Context, i int) { out.Results[i] = g.Decide(ctx, bodies[i], "") }
	if len(g.links) == 0 { // decide answers config_error at once
		for i := range bodies {
			decide(answer.Throughput(ctx), i)
		}
		return out
	}
	g.opt.Answer.Each(ctx, g.links[0].model, 1, len(bodies), 0, decide)
	return out
}

// batchFields are the fields of a decide batch: a decide request's, with
// contexts for its context and no request_id.
var batchFields = func() []string {
	var out []string
	for _, f := range requestFields {
		switch f {
		case "context":
			out = append(out, "contexts")
		case "request_id":
		default:
			out = append(out, f)
		}
	}
	return out
}()

// splitBatch reads a decide batch into the decide request of each of its
// contexts, or the batch's problems: those of the request it shares (as
// ParseRequest finds them), and each context's, named contexts[i].
func splitBatch(raw []byte) (bodies [][]byte, problems []string) {
	if !json.Valid(raw) {
		return nil, []string{"the batch must be a JSON object with a question and contexts"}
	}
	fields, err := jsonx.Members(raw)
	if err != nil {
		return nil, []string{"the batch must be a JSON object with a question and contexts: " + err.Error()}
	}
	// Each context's request is written with the shared members and the
	// context verbatim, never re-encoded (encoding/json would escape
	// "&", "<" and ">" in them): the model reads each context as
	// POST /v1/decide would give it.
	shared := make([]jsonx.Member, 0, len(fields)+1)
	var contexts json.RawMessage
	var unknown []string
	for _, m := range fields {
		switch {
		case m.Key == "contexts":
			contexts = m.Value
		case m.Key == "context":
			problems = append(problems, "a batch gives its contexts as contexts, an array; it takes no context")
		case m.Key == "request_id":
			problems = append(problems, "a batch takes no request_id: each context's response gets an id of its own")
		case !slices.Contains(batchFields, m.Key):
			unknown = append(unknown, m.Key)
		default:
			shared = append(shared, m)
		}
	}
	if p := unknownFields(unknown, batchFields); p != "" {
		problems = append(problems, p)
	}
	if _, ps := ParseRequest(jsonx.AppendObject(nil, shared)); len(ps) > 0 {
		problems = append(problems, ps...)
	}
	var list []json.RawMessage
	switch {
	case contexts == nil || jsonx.Kind(contexts) == "null":
		return nil, append(problems, fmt.Sprintf("contexts is required: an array of 1 to %d context objects", MaxBatchContexts))
	case jsonx.Kind(contexts) != "array" || json.Unmarshal(contexts, &list) != nil:
		return nil, append(problems, fmt.Sprintf("contexts must be an array of 1 to %d context objects", MaxBatchContexts))
	case len(list) == 0:
		return nil, append(problems, "contexts must hold at least one context")
	case len(list) > MaxBatchContexts:
		return nil, append(problems, fmt.Sprintf("%d contexts; at most %d are accepted in one batch", len(list), MaxBatchContexts))
	}
	for i, c := range list {
		// The context's own rules, as a request of a plain question
		// checks them: each problem of this one is the context's.
		probe := jsonx.AppendObject(nil, []jsonx.Member{{Key: "question", Value: json.RawMessage(`"q"`)}, {Key: "context", Value: c}})
		_, ps := ParseRequest(probe)
		for _, p := range ps {
			problems = append(problems, fmt.Sprintf("contexts[%d]: %s", i, p))
		}
		if jsonx.Kind(c) == "null" {
			problems = append(problems, fmt.Sprintf("contexts[%d]: a context object is required", i))
		}
		bodies = append(bodies, jsonx.AppendObject(nil, append(shared, jsonx.Member{Key: "context", Value: c})))
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return bodies, nil
}
