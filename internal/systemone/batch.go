package systemone

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"system1/internal/decision"
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
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s...)
	}
	b = append(b, ']')
	b = appendQuestions(b, req.Questions)
	return append(b, '}')
}

// ParseBatchResponse reads a POST /v1/systemone/batch reply to req over n
// states: {"results": [...]}, one System One response per state in the
// states' order. A reply that is not that shape, or holds another number of
// results, is an error; a result that fails the clients' checks is that
// state's error (wrapping ErrMalformed) in errs, aligned with replies.
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
	data, err := c.do(ctx, http.MethodPost, c.endpoint()+BatchPath, AppendBatchRequest(nil, req, states))
	if err != nil {
		return nil, nil, err
	}
	replies, errs, err := ParseBatchResponse(req, len(states), data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return replies, errs, nil
}
