package systemone

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
)

// AppendRequest writes req as a POST /v1/systemone body, keeping question
// and criteria order.
func AppendRequest(b []byte, req decision.Request) []byte {
	b = append(b, `{"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"state":`...)
	b = append(b, req.State...)
	b = appendQuestions(b, req.Questions)
	return append(b, '}')
}

// appendQuestions writes `,"questions":{...}`, keeping question and
// criteria order.
func appendQuestions(b []byte, qs []decision.Question) []byte {
	b = append(b, `,"questions":{`...)
	for i, q := range qs {
		b = comma(b, i)
		b = appendString(b, q.ID)
		b = append(b, `:{"type":`...)
		b = appendString(b, string(q.Kind))
		b = append(b, `,"instructions":`...)
		b = appendRaw(b, q.Instructions)
		b = append(b, `,"criteria":`...)
		if q.Kind == decision.Score {
			// Jev takes a score's levels as an ordered array only; a level
			// given by name goes as its name alone, or as the structured
			// entry {"label", "description"} when it has a description.
			b = append(b, '[')
			for j, o := range q.Options {
				b = comma(b, j)
				b = appendLevel(b, o)
			}
			b = append(b, ']')
		} else {
			// Choice and noul criteria are objects whose key order is the
			// option order.
			b = append(b, '{')
			for j, o := range q.Options {
				b = comma(b, j)
				b = appendString(b, o.Name)
				b = append(b, ':')
				b = appendRaw(b, o.Text)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendLevel writes a score level as an entry of Jev's criteria array:
// a level given by name (o.Name) as the name, or {"label", "description"}
// when it has a description; any other as its text.
func appendLevel(b []byte, o decision.Option) []byte {
	if o.Name == "" {
		return appendRaw(b, o.Text)
	}
	if len(o.Text) == 0 || string(o.Text) == "null" {
		return appendString(b, o.Name)
	}
	b = append(b, `{"label":`...)
	b = appendString(b, o.Name)
	b = append(b, `,"description":`...)
	b = append(b, o.Text...)
	return append(b, '}')
}

// requestSize is about the length of req's body, so that it is written
// into one allocation: its verbatim parts and a little for the rest.
func requestSize(req decision.Request) int {
	n := 64 + len(req.Model) + len(req.State)
	for _, q := range req.Questions {
		n += 64 + len(q.ID) + len(q.Instructions)
		for _, o := range q.Options {
			n += 8 + len(o.Name) + len(o.Text)
		}
	}
	return n
}

func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// StatusError is a System One endpoint's refusal: its status, its message,
// and how long it asked to be left alone.
type StatusError struct {
	Code       int
	Message    string
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("status %d: %s", e.Code, e.Message)
}

// Client calls one System One endpoint.
type Client struct {
	// BaseURL is the endpoint's root, as clients of hosted Jev configure
	// it: https://api.typesafe.ai, to which /v1/systemone is added. A URL
	// that already ends in /v1/systemone is used as is.
	BaseURL string
	Key     string // bearer key; empty sends none
	HTTP    *http.Client
	// MaxBody bounds the response body read; 0 is httpcall's default.
	MaxBody int64
}

// Ask sends req and returns the checked reply. A refusal is a
// *StatusError; an answer that fails the clients' checks is an error
// wrapping ErrMalformed.
func (c *Client) Ask(ctx context.Context, req decision.Request) (*Reply, error) {
	data, err := c.do(ctx, http.MethodPost, c.endpoint(), AppendRequest(make([]byte, 0, requestSize(req)), req), c.MaxBody)
	if err != nil {
		return nil, err
	}
	r, err := ParseResponse(req, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return r, nil
}

// do sends one request with the bearer key and returns the body of a 200
// reply of at most maxBody bytes; any other status is a *StatusError
// carrying the server's message (with the key redacted, should the server
// echo it) and Retry-After.
func (c *Client) do(ctx context.Context, method, url string, body []byte, maxBody int64) ([]byte, error) {
	data, err := httpcall.Send(ctx, c.HTTP, method, url, nil, body, c.Key, maxBody)
	var se *httpcall.StatusError
	switch {
	case errors.As(err, &se):
		code, msg := se.Code, ErrorMessage(se.Body)
		if code == http.StatusBadRequest && strings.HasPrefix(msg, unknownModelPrefix) {
			// Hosted Jev (and system1) answer a model they do not serve
			// with a 400; to a client that asked because the endpoint
			// listed it, that is a stale model list, as a 404 is: the
			// model's trouble on this endpoint, not the request's.
			code = http.StatusNotFound
		}
		return nil, &StatusError{Code: code, Message: msg, RetryAfter: se.RetryAfter}
	case errors.Is(err, httpcall.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return data, err
}

// unknownModelPrefix begins hosted Jev's message for a model it does not
// serve: "Unknown model: …" (jev-1.14.md section 7).
const unknownModelPrefix = "Unknown model: "

// ErrMalformed marks a 200 reply that fails the clients' checks.
var ErrMalformed = errors.New("malformed System One reply")

func (c *Client) endpoint() string {
	u := strings.TrimRight(c.BaseURL, "/")
	if strings.HasSuffix(u, "/v1/systemone") {
		return u
	}
	return u + "/v1/systemone"
}

// ErrorMessage extracts a readable message from an error body in any of
// the shapes System One servers use, else the start of the raw text.
func ErrorMessage(body []byte) string {
	var e struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
		Msg    string          `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil {
		for _, raw := range []json.RawMessage{e.Error, e.Detail} {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				return s
			}
			var obj struct {
				Message string `json:"message"`
				Msg     string `json:"msg"`
			}
			if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
				return obj.Message
			}
			var list []struct {
				Loc []any  `json:"loc"`
				Msg string `json:"msg"`
			}
			if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
				parts := make([]string, len(list))
				for i, it := range list {
					parts[i] = fmt.Sprint(it.Loc) + ": " + it.Msg
				}
				return strings.Join(parts, "; ")
			}
		}
		if e.Msg != "" {
			return e.Msg
		}
	}
	return httpcall.Excerpt(body)
}

// Models lists the endpoint's models from GET /v1/models, in Jev's shape
// ({"models": [{"name"}]}) or OpenAI's ({"data": [{"id"}]}).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	data, err := c.do(ctx, http.MethodGet, c.modelsURL(), nil, c.MaxBody)
	if err != nil {
		return nil, err
	}
	var list struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%w: model list: %v", ErrMalformed, err)
	}
	var ids []string
	for _, m := range list.Models {
		ids = append(ids, m.Name)
	}
	for _, m := range list.Data {
		if !slices.Contains(ids, m.ID) {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

func (c *Client) modelsURL() string {
	return strings.TrimSuffix(strings.TrimRight(c.BaseURL, "/"), "/v1/systemone") + "/v1/models"
}

// identitySource names where a System One endpoint's identity is read.
const identitySource = "systemone /v1/models"

// Identity reads what the endpoint's GET /v1/models says of model: in
// Jev's shape its description and release_date, in OpenAI's its owned_by
// and root (a created stamp is left out: some servers stamp the time of
// the request). An endpoint without a model list (laya-serve answers 404)
// or one that does not list model has an unknown identity, no fields and
// no error: then the model id its answers carry (Reply.Model) and the
// canary are what speak for the build. The reply is bounded by
// fingerprint.MaxReply, and the call carries no user data.
func (c *Client) Identity(ctx context.Context, model string) (fingerprint.Identity, error) {
	unknown := fingerprint.Identity{Source: identitySource}
	data, err := c.do(ctx, http.MethodGet, c.modelsURL(), nil, fingerprint.MaxReply)
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusNotFound:
		return unknown, nil
	case err != nil:
		return unknown, err
	}
	var list struct {
		Models []map[string]json.RawMessage `json:"models"`
		Data   []map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return unknown, fmt.Errorf("%w: model list: %v", ErrMalformed, err)
	}
	if id, ok := fingerprint.Listed(identitySource, list.Models, "name", model, "description", "release_date"); ok {
		return id, nil
	}
	id, _ := fingerprint.Listed(identitySource, list.Data, "id", model, "owned_by", "root")
	return id, nil
}
