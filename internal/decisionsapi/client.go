package decisionsapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"system1/internal/decision"
	"system1/internal/fingerprint"
	"system1/internal/httpcall"
	"system1/internal/jsonx"
)

// wireRequest is a request as this package's client sends it.
type wireRequest struct {
	Model     string          `json:"model"`
	Input     json.RawMessage `json:"input"`
	Questions []wireQuestion  `json:"questions"`
}

type wireQuestion struct {
	Type         string       `json:"type"`
	Name         string       `json:"name"`
	Instructions string       `json:"instructions"`
	Choices      []wireChoice `json:"choices,omitempty"`
	Levels       []wireLevel  `json:"levels,omitempty"`
}

type wireChoice struct {
	Value       string  `json:"value"`
	Description *string `json:"description,omitempty"`
}

type wireLevel struct {
	Label       string  `json:"label"`
	Description *string `json:"description,omitempty"`
}

// AppendRequest writes req as a POST /v1/decisions body, in question and
// option order, every question named by its id:
//   - a string state is the input string; a JSON object (or array of
//     objects) within input_json's limits is one user message's input_json
//     part; any other state is its compact JSON text;
//   - a noul is a predicate whose instructions end with its sides'
//     descriptions under "Criteria for true:" and "Criteria for false:",
//     as the AI SDK writes them;
//   - a choice's options are its choices, valued by key; a score's levels
//     are labelled as levelLabel says;
//   - instructions, and descriptions that are JSON, go as compact JSON
//     text (every Decisions server reads a string).
func AppendRequest(b []byte, req decision.Request) []byte {
	w := wireRequest{Model: req.Model, Input: input(req.State), Questions: make([]wireQuestion, len(req.Questions))}
	for i, q := range req.Questions {
		wq := wireQuestion{Type: TypeName(q.Kind), Name: q.ID, Instructions: jsonx.Text(q.Instructions)}
		switch q.Kind {
		case decision.Noul:
			parts := []string{}
			if wq.Instructions != "" {
				parts = append(parts, wq.Instructions)
			}
			for _, o := range q.Options {
				if t := jsonx.Text(o.Text); t != "" {
					parts = append(parts, "Criteria for "+o.Key+":\n"+t)
				}
			}
			wq.Instructions = strings.Join(parts, "\n\n")
		case decision.Choice:
			for _, o := range q.Options {
				wq.Choices = append(wq.Choices, wireChoice{Value: o.Key, Description: describe(o.Text)})
			}
		case decision.Score:
			for _, o := range q.Options {
				l := wireLevel{Label: levelLabel(o)}
				if o.Name != "" {
					l.Description = describe(o.Text)
				}
				wq.Levels = append(wq.Levels, l)
			}
		}
		w.Questions[i] = wq
	}
	return appendJSON(b, w)
}

// levelLabel is the label a score level is sent with: its name, else its
// description (Jev's plain levels are known by their text alone), which
// is what the model reads of it either way.
func levelLabel(o decision.Option) string {
	if o.Name != "" {
		return o.Name
	}
	return jsonx.Text(o.Text)
}

func describe(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	t := jsonx.Text(raw)
	return &t
}

// input writes a state as the input.
func input(state json.RawMessage) json.RawMessage {
	switch jsonx.Kind(state) {
	case "string":
		return state
	case "object", "array":
		var p Parsed // only its problems are used: does the state fit input_json?
		if p.readJSONData("", state); len(p.problems) == 0 {
			return appendJSON(nil, []any{map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "input_json", "data": state},
			}}})
		}
	}
	return appendJSON(nil, jsonx.Text(state))
}

// ParseError reads an endpoint's refusal from its error body: OpenAI's
// envelope (with code a string, or vLLM's integer), Ollama's {"error":
// "message"}, or any text, cut to its start.
func ParseError(status int, body []byte, retryAfter time.Duration) *Error {
	e := &Error{Status: status, RetryAfter: retryAfter}
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil {
		var obj struct {
			Message json.RawMessage `json:"message"`
			Type    json.RawMessage `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(env.Error, &e.Message) == nil && e.Message != "" {
			return e
		}
		if json.Unmarshal(env.Error, &obj) == nil {
			e.Message, e.Type, e.Param, e.Code = scalar(obj.Message), scalar(obj.Type), scalar(obj.Param), scalar(obj.Code)
			if e.Message != "" {
				return e
			}
		}
	}
	e.Message = httpcall.Excerpt(body)
	return e
}

// scalar reads a string or a number as text; anything else is "".
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// ErrMalformed marks a 200 reply that fails the clients' checks.
var ErrMalformed = errors.New("malformed Decisions reply")

// Client calls one Decisions endpoint.
type Client struct {
	// BaseURL is the endpoint's root as OpenAI's SDKs configure it
	// (https://api.openai.com/v1), or the server's root, to which /v1 is
	// added; a URL that ends in /decisions is used as is.
	BaseURL string
	Key     string // bearer key; empty sends none
	HTTP    *http.Client
	// MaxBody bounds the response body read; 0 is httpcall's default.
	MaxBody int64
}

// Ask sends req and returns the checked reply. A refusal of the request
// is an *Error; a reply that fails the clients' checks is an error
// wrapping ErrMalformed (and the *AnswerError, when one answer failed). A refused question is a refusal in the reply,
// not an error.
func (c *Client) Ask(ctx context.Context, req decision.Request) (*Reply, error) {
	data, err := c.do(ctx, http.MethodPost, c.root()+"/decisions", AppendRequest(nil, req), c.MaxBody)
	if err != nil {
		return nil, err
	}
	r, err := ParseResponse(req, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err) // an *AnswerError stays one
	}
	return r, nil
}

// Models lists the endpoint's models from GET /v1/models ({"data": [{"id"}]}).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	data, err := c.do(ctx, http.MethodGet, c.root()+"/models", nil, c.MaxBody)
	if err != nil {
		return nil, err
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%w: model list: %v", ErrMalformed, err)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID != "" && !slices.Contains(ids, m.ID) {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// root is the URL the routes hang from: the base with /v1, without
// /decisions.
func (c *Client) root() string {
	u := strings.TrimSuffix(strings.TrimRight(c.BaseURL, "/"), "/decisions")
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	return u
}

// do sends one request with the bearer key and returns the body of a 200
// reply of at most maxBody bytes; any other status is an *Error read
// from the endpoint's envelope.
func (c *Client) do(ctx context.Context, method, url string, body []byte, maxBody int64) ([]byte, error) {
	data, err := httpcall.Send(ctx, c.HTTP, method, url, acceptJSON, body, c.Key, maxBody)
	var se *httpcall.StatusError
	switch {
	case errors.As(err, &se):
		return nil, ParseError(se.Code, se.Body, se.RetryAfter)
	case errors.Is(err, httpcall.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return data, err
}

// acceptJSON is the header every call to a Decisions endpoint carries.
var acceptJSON = http.Header{"Accept": {"application/json"}}

// identitySource names where a Decisions endpoint's identity is read.
const identitySource = "decisions /v1/models"

// Identity reads what the endpoint's GET /v1/models says of model:
// owned_by, and where a vLLM-style server reports them, root, parent and
// max_model_len (created is left out: vLLM stamps it with the time of the
// request). An endpoint without a model list (404) or one that does not
// list model has an unknown identity, no fields and no error: then the
// model id its answers carry (Reply.Model) and the canary are what speak
// for the build, and a hosted alias that moves to a new snapshot under
// the same id shows only in the canary. The reply is bounded by
// fingerprint.MaxReply, and the call carries no user data.
func (c *Client) Identity(ctx context.Context, model string) (fingerprint.Identity, error) {
	unknown := fingerprint.Identity{Source: identitySource}
	data, err := c.do(ctx, http.MethodGet, c.root()+"/models", nil, fingerprint.MaxReply)
	var se *Error
	switch {
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		return unknown, nil
	case err != nil:
		return unknown, err
	}
	var list struct {
		Data []map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return unknown, fmt.Errorf("%w: model list: %v", ErrMalformed, err)
	}
	id, _ := fingerprint.Listed(identitySource, list.Data, "id", model, "owned_by", "root", "parent", "max_model_len")
	return id, nil
}
