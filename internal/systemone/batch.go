package systemone

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// MaxBatchStates is how many states one POST /v1/systemone/batch may
// carry: laya-serve's documented cap.
const MaxBatchStates = 64

// BatchPath is the route, under an endpoint's /v1/systemone, that answers
// one questions map over several states (laya-serve's extension of Jev).
const BatchPath = "/batch"

// AppendBatchRequest writes req's model and questions over states as a
// POST /v1/systemone/batch body, laya-serve's shape: {"model", "states":
// [...], "questions"}. req.State is not written.
func AppendBatchRequest(b []byte, req decision.Request, states []json.RawMessage) []byte {
	b = append(b, `{"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"states":[`...)
	for i, s := range states {
		b = comma(b, i)
		b = append(b, s...)
	}
	b = append(b, ']')
	b = appendQuestions(b, req.Questions)
	return append(b, '}')
}

// BatchParsed is a POST /v1/systemone/batch body read as far as it could
// be: the model and questions as ParseRequest reads them from a
// /v1/systemone body, and the states, with every problem found on the
// way. Only a batch without problems may be asked.
type BatchParsed struct {
	// Parsed holds the model, the questions and their problems; its State
	// is unused.
	Parsed
	States []json.RawMessage
}

// ParseBatchRequest reads a POST /v1/systemone/batch body, laya-serve's
// shape: {"model", "states": [1 to MaxBatchStates states], "questions"},
// each state what /v1/systemone's "state" may be. Unknown top-level
// fields and Jev 1.14's images are listed as ParseRequest lists them,
// for the face to refuse as it refuses them on /v1/systemone.
func ParseBatchRequest(body []byte) *BatchParsed {
	p := &BatchParsed{Parsed: *ParseRequest(body)}
	// ParseRequest reads a "state"; a batch has "states" instead.
	p.Problems = slices.DeleteFunc(p.Problems, func(pr decision.Problem) bool { return len(pr.Path) == 1 && pr.Path[0] == "state" })
	// Nor is "states" a field the batch does not define.
	p.Unknown = slices.DeleteFunc(p.Unknown, func(f string) bool { return f == "states" })
	top, err := jsonx.Members(body)
	if err != nil || !p.isJSON { // json.Valid(body), as ParseRequest found it
		return p // the body itself could not be read, which ParseRequest said
	}
	// A single request's state (or document) beside the states is a field
	// the batch does not define: refused as unknown, never dropped in
	// silence. (Without states, a single body's problem is their absence.)
	if _, ok := jsonx.Lookup(top, "states"); ok {
		unknown := p.Unknown
		p.Unknown = nil
		for _, m := range top { // in body order, as ParseRequest lists them
			if m.Key == "state" || m.Key == "document" || slices.Contains(unknown, m.Key) {
				p.Unknown = append(p.Unknown, m.Key)
			}
		}
	}
	raw, ok := jsonx.Lookup(top, "states")
	if !ok || jsonx.Kind(raw) == "null" {
		p.fail("missing", fmt.Sprintf("Field required: states, an array of 1 to %d states", MaxBatchStates), "states")
		return p
	}
	states, err := jsonx.Elements(raw)
	if jsonx.Kind(raw) != "array" || err != nil {
		p.fail("list_type", fmt.Sprintf("states must be an array of 1 to %d states", MaxBatchStates), "states")
		return p
	}
	switch {
	case len(states) == 0:
		p.fail("too_short", "states must hold at least one state", "states")
		return p
	case len(states) > MaxBatchStates:
		p.fail("too_long", fmt.Sprintf("%d states; at most %d are accepted in one batch", len(states), MaxBatchStates), "states")
		return p
	}
	for i, s := range states {
		switch jsonx.Kind(s) {
		case "string", "object", "array":
		case "null":
			p.fail("missing", "a state is required", "states", strconv.Itoa(i))
		default:
			p.fail("union_type", "a state must be a string, an object or an array", "states", strconv.Itoa(i))
		}
	}
	p.States = states // decoded copies of the bytes as sent
	return p
}

// Validate returns the batch's structural problems plus those of lim:
// the questions' as for /v1/systemone, and each state's size, named
// states.<i>.
func (p *BatchParsed) Validate(lim decision.Limits) []decision.Problem {
	out := p.Parsed.Validate(lim)
	for i, s := range p.States {
		for _, pr := range decision.ValidateState(s, lim) {
			pr.Path = []string{"states", strconv.Itoa(i)}
			out = append(out, pr)
		}
	}
	return out
}

// AppendBatchResponse writes a POST /v1/systemone/batch reply:
// {"results": [...], "request_ids": [...], "usage": {...}}. Each result
// is what /v1/systemone would have answered for its state: a response
// (Response.AppendJSON), or the error body it would have sent with its
// status added (AppendBatchError); request_ids are the ids each state's
// answers were recorded under, aligned with results; usage sums the
// answered states' tokens.
func AppendBatchResponse(b []byte, results [][]byte, ids []string, usage Usage) []byte {
	b = append(b, `{"results":[`...)
	for i, r := range results {
		b = comma(b, i)
		b = append(b, r...)
	}
	b = append(b, `],"request_ids":[`...)
	for i, id := range ids {
		b = comma(b, i)
		b = appendString(b, id)
	}
	b = append(b, `],"usage":`...)
	b = usage.appendJSON(b)
	return append(b, '}')
}

// AppendBatchError writes a batch result for a state that was not
// answered: the error body /v1/systemone would have sent for it, with
// its HTTP status added as "status".
func AppendBatchError(b []byte, status int, body []byte) []byte {
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	body = bytes.TrimSpace(body)
	if len(body) > 2 && body[0] == '{' {
		return append(append(b, ','), body[1:]...)
	}
	return append(b, '}')
}

// ParseBatchResponse reads a POST /v1/systemone/batch reply to req over n
// states: {"results": [...]}, one System One response per state in the
// states' order. A reply that is not that shape, or holds another number of
// results, is an error; a result that is an error (system1's shape for a
// state that was not answered: an error body with its "status") is that
// state's *StatusError, and one that fails the clients' checks is that
// state's error wrapping ErrMalformed, in errs, aligned with replies.
func ParseBatchResponse(req decision.Request, n int, body []byte) (replies []*Reply, errs []error, err error) {
	var top struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, nil, fmt.Errorf("body: %w", err)
	}
	if top.Results == nil {
		return nil, nil, fmt.Errorf("results: an array is required")
	}
	if len(top.Results) != n {
		return nil, nil, fmt.Errorf("results: %d for %d states", len(top.Results), n)
	}
	replies, errs = make([]*Reply, n), make([]error, n)
	for i, raw := range top.Results {
		if se := batchError(raw); se != nil {
			errs[i] = se
			continue
		}
		r, err := ParseResponse(req, raw)
		if err != nil {
			errs[i] = fmt.Errorf("%w: results[%d]: %v", ErrMalformed, i, err)
			continue
		}
		replies[i] = r
	}
	return replies, errs, nil
}

// AskBatch sends req's questions over states to the endpoint's batch
// route and returns each state's checked reply, or its error, aligned with
// states. A refusal of the whole call is a *StatusError (a 404 or 405: the
// endpoint has no batch route); a reply that is not a batch answer is an
// error wrapping ErrMalformed.
func (c *Client) AskBatch(ctx context.Context, req decision.Request, states []json.RawMessage) ([]*Reply, []error, error) {
	data, err := c.do(ctx, http.MethodPost, c.endpoint()+BatchPath, AppendBatchRequest(nil, req, states), c.MaxBody)
	if err != nil {
		return nil, nil, err
	}
	replies, errs, err := ParseBatchResponse(req, len(states), data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return replies, errs, nil
}

// batchError reads a batch result that is an error: an object with a
// "status" and an "error", and no "answers"; nil for any other.
func batchError(raw json.RawMessage) *StatusError {
	var e struct {
		Status  int             `json:"status"`
		Error   json.RawMessage `json:"error"`
		Answers json.RawMessage `json:"answers"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Status < 400 || e.Status > 599 || e.Error == nil || e.Answers != nil {
		return nil
	}
	return &StatusError{Code: e.Status, Message: ErrorMessage(raw)}
}
