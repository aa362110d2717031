package decisionsapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"system1/internal/decision"
)

// decisionsServer serves POST /v1/decisions with this package's server
// side (each question's distribution is fixed by its option count) and
// GET /v1/models, and answers each model in refusals with its error.
func decisionsServer(t *testing.T, refusals map[string]*Error) (*httptest.Server, *[]http.Header) {
	t.Helper()
	var seen []http.Header
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decisions", func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Clone())
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		p := ParseRequest(body)
		e := p.Validate(decision.DefaultLimits())
		if e == nil {
			e = refusals[p.Model]
		}
		if e != nil {
			e.SetHeaders(w.Header())
			w.WriteHeader(e.Status)
			_, _ = w.Write(e.AppendJSON(nil))
			return
		}
		res := Response{Model: p.Model + "-served", Request: p, Usage: Usage{InputTokens: 12, CachedTokens: 4, OutputTokens: 2}}
		for _, q := range p.Questions {
			d := make(decision.Distribution, len(q.Options))
			d[0] = 0.7
			for j := 1; j < len(d); j++ {
				d[j] = 0.3 / float64(len(d)-1)
			}
			res.Dists = append(res.Dists, d)
		}
		out, err := res.AppendJSON(nil)
		if err != nil {
			t.Error(err)
		}
		_, _ = w.Write(out)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"b","object":"model"},{"id":"a","object":"model"},{"id":"a"}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestClientAsksOverHTTP(t *testing.T) {
	srv, seen := decisionsServer(t, nil)
	req := sampleRequest(t)
	for _, base := range []string{srv.URL, srv.URL + "/", srv.URL + "/v1", srv.URL + "/v1/decisions"} {
		c := &Client{BaseURL: base, Key: "sk-test", HTTP: srv.Client()}
		r, err := c.Ask(context.Background(), req)
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if r.Model != "m-served" || r.Usage != (Usage{InputTokens: 12, CachedTokens: 4, OutputTokens: 2}) {
			t.Errorf("%s: model %q usage %+v", base, r.Model, r.Usage)
		}
		for i, d := range r.Dists {
			if d == nil || d[0] < 0.69 {
				t.Errorf("%s: question %d: %v", base, i, d)
			}
		}
		models, err := c.Models(context.Background())
		if err != nil || !reflect.DeepEqual(models, []string{"b", "a"}) {
			t.Errorf("%s: models %v, %v", base, models, err)
		}
	}
	h := (*seen)[0]
	if h.Get("Authorization") != "Bearer sk-test" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
}

// An endpoint's refusal comes back as a *Error read from its
// envelope, with its status and the pause it asked for (the fleet
// classifies it by the status).
func TestClientRefusals(t *testing.T) {
	srv, _ := decisionsServer(t, map[string]*Error{
		"limited": TooManyRequests("slow down", 2500*time.Millisecond),
		"gone":    ModelNotFound("gone"),
		"busy":    ServiceUnavailable("no node", time.Second),
		"long":    ContextLengthExceeded("the input is 90000 tokens; the model reads 8192"),
	})
	req := sampleRequest(t)
	for _, tc := range []struct {
		model       string
		status      int
		code, param string
		retry       time.Duration
	}{
		{"limited", 429, CodeRateLimitExceeded, "", 2500 * time.Millisecond},
		{"gone", 404, CodeModelNotFound, "model", 0},
		{"busy", 503, "", "", time.Second},
		{"long", 400, CodeContextLengthExceeded, "input", 0},
	} {
		req.Model = tc.model
		_, err := (&Client{BaseURL: srv.URL, HTTP: srv.Client()}).Ask(context.Background(), req)
		var se *Error
		if !errors.As(err, &se) {
			t.Fatalf("%s: %v", tc.model, err)
		}
		if se.Status != tc.status || se.Code != tc.code || se.Param != tc.param || se.RetryAfter != tc.retry || se.Message == "" ||
			(tc.param != "" && !strings.HasPrefix(se.Detail(), tc.param+": ")) {
			t.Errorf("%s: %+v (%s)", tc.model, se, se.Detail())
		}
	}
	// A question the server cannot take is the request's fault.
	req = sampleRequest(t)
	req.Questions[1].Options = req.Questions[1].Options[:1]
	_, err := (&Client{BaseURL: srv.URL, HTTP: srv.Client()}).Ask(context.Background(), req)
	var se *Error
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest || se.Param != "questions[1].choices" {
		t.Errorf("one choice: %v", err)
	}
}

func TestClientMalformedReply(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Replace(goodReply, `"choice":"billing"`, `"choice":"legal"`, 1))
	}))
	defer srv.Close()
	_, err := (&Client{BaseURL: srv.URL, HTTP: srv.Client()}).Ask(context.Background(), sampleRequest(t))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("a reply that fails the clients' checks: %v", err)
	}
}

// Upstream envelopes as servers of this wire write them, read: the
// message, type, code (vLLM's integer as its text) and param.
func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		status                    int
		body                      string
		message, typ, code, param string
	}{
		{400, `{"error":{"message":"questions[2].choices: too many","type":"invalid_request_error","param":"questions[2].choices","code":null}}`,
			"questions[2].choices: too many", "invalid_request_error", "", "questions[2].choices"},
		{400, `{"error":{"message":"1 question of 65: at most 64","type":"BadRequestError","param":null,"code":400}}`,
			"1 question of 65: at most 64", "BadRequestError", "400", ""},
		{501, `{"error":{"message":"The model does not support the decisions API","type":"NotImplementedError","param":null,"code":501}}`,
			"The model does not support the decisions API", "NotImplementedError", "501", ""},
		{404, `{"error":{"message":"Model not found gpt-5.6-luna","type":"invalid_request_error","param":"model","code":null}}`,
			"Model not found gpt-5.6-luna", "invalid_request_error", "", "model"},
		{422, `{"error":{"message":"bad","type":"invalid_request"}}`, "bad", "invalid_request", "", ""},
		{429, `{"error":{"message":"slow","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "slow", "requests", "rate_limit_exceeded", ""},
		{503, `{"error":{"message":"saturated","type":"invalid_request"}}`, "saturated", "invalid_request", "", ""},
		{500, `{"error":"model crashed"}`, "model crashed", "", "", ""},
		{504, `upstream timed out`, "upstream timed out", "", "", ""},
		{502, ``, "(empty body)", "", "", ""},
	} {
		e := ParseError(tc.status, []byte(tc.body), 0)
		if e.Status != tc.status || e.Message != tc.message || e.Type != tc.typ || e.Code != tc.code || e.Param != tc.param {
			t.Errorf("%d %s: %+v", tc.status, tc.body, e)
		}
	}
}
