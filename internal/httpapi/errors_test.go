package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/systemone"
)

// choiceOf is a request with one choice of n options.
func choiceOf(n int) string {
	var opts []string
	for i := range n {
		opts = append(opts, fmt.Sprintf(`"option %d":null`, i))
	}
	return `{"model":"fake","state":"s","questions":{"big":{"type":"choice","criteria":{` + strings.Join(opts, ",") + `}}}}`
}

// validationError is a 422 body in both shapes: OpenAI's error naming the
// first field and listing every problem, FastAPI's detail list.
type validationError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
	} `json:"error"`
	Detail []struct {
		Loc  []string `json:"loc"`
		Msg  string   `json:"msg"`
		Type string   `json:"type"`
	} `json:"detail"`
}

// A request that cannot be asked is a 422 listing every problem in both
// shapes, each located from the body's root; a choice with more options
// than the nodes take names the cap: 255, as hosted Jev, unless a node's
// max_options says otherwise.
func TestValidationErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		body       string
		maxOptions int
		want       []string // each problem as "loc type"
		msgHas     []string
	}{
		{name: "malformed JSON", body: `{"model":"fake","state":`, want: []string{"body json_invalid"}},
		{name: "not an object", body: `["fake"]`, want: []string{"body model_attributes_type"}},
		{name: "missing fields", body: `{}`, want: []string{
			"body.model missing", "body.state missing", "body.questions missing"}},
		{name: "an empty model", body: `{"model":"","state":"s","questions":{"q":{"type":"noul"}}}`,
			want: []string{"body.model string_too_short"}, msgHas: []string{"model: model must not be empty"}},
		{name: "no questions", body: `{"model":"fake","state":"s","questions":{}}`, want: []string{"body.questions too_short"}},
		{name: "bad criteria", body: `{"model":"fake","state":"s","questions":{
			"list":{"type":"choice","criteria":["a","b"]},
			"none":{"type":"choice"},
			"text":{"type":"score","criteria":"low to high"},
			"one":{"type":"choice","criteria":{"only":null}},
			"kind":{"type":"poll"}}}`, want: []string{
			"body.questions.list.criteria dict_type",
			"body.questions.none.criteria missing",
			"body.questions.text.criteria list_type",
			"body.questions.kind.type union_tag_invalid",
			"body.questions.one.criteria too_short",
		}},
		{name: "noul criteria beyond true and false", body: `{"model":"fake","state":"s","questions":{
			"n":{"type":"noul","criteria":{"true":"it is","maybe":"who knows"}}}}`,
			want: []string{"body.questions.n.criteria.maybe extra_forbidden"}, msgHas: []string{`"maybe"`}},
		{name: "score with 11 levels", body: `{"model":"fake","state":"s","questions":{
			"s":{"type":"score","criteria":["0","1","2","3","4","5","6","7","8","9","10"]}}}`,
			want: []string{"body.questions.s.criteria too_long"}, msgHas: []string{"at most 10 levels; got 11"}},
		{name: "choice over the default option cap", body: choiceOf(256),
			want: []string{"body.questions.big.criteria too_long"}, msgHas: []string{"256 options", "capacity of 255"}},
		{name: "choice over a configured option cap", body: choiceOf(25), maxOptions: 24,
			want: []string{"body.questions.big.criteria too_long"}, msgHas: []string{"25 options", "capacity of 24"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{}, func(c *config.Node) { c.MaxOptions = tc.maxOptions })
			s := serve(t, setup{nodes: []node{n}})
			r := s.ask(t, tc.body)
			got, e := validation(t, r)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, s := range tc.msgHas {
				if !strings.Contains(e.Error.Message, s) {
					t.Errorf("message %q does not mention %s", e.Error.Message, s)
				}
			}
			if len(n.fake.Inferences()) != 0 {
				t.Error("a request with problems reached the engine")
			}
		})
	}
}

// validation checks a 422 reply: both shapes, every detail entry located
// from the body and listed in error.message, error.param naming the first.
// It returns each problem as "loc type".
func validation(t *testing.T, r reply) ([]string, validationError) {
	t.Helper()
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("got %s, want 422", r)
	}
	var e validationError
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	if len(e.Detail) == 0 {
		t.Fatalf("no detail list: %s", r.body)
	}
	var got []string
	for _, d := range e.Detail {
		if len(d.Loc) == 0 || d.Loc[0] != "body" || d.Msg == "" || d.Type == "" {
			t.Fatalf("detail %+v", d)
		}
		got = append(got, strings.Join(d.Loc, ".")+" "+d.Type)
		field := strings.Join(d.Loc[1:], ".")
		if field == "" {
			field = "body"
		}
		if !strings.Contains(e.Error.Message, field+": "+d.Msg) {
			t.Errorf("error.message %q does not list %s: %s", e.Error.Message, field, d.Msg)
		}
	}
	if e.Error.Type != "invalid_request_error" {
		t.Errorf("error.type %q", e.Error.Type)
	}
	switch first := e.Detail[0].Loc[1:]; {
	case len(first) == 0 && e.Error.Param != nil:
		t.Errorf("error.param %q for a problem with the whole body", *e.Error.Param)
	case len(first) > 0 && (e.Error.Param == nil || *e.Error.Param != strings.Join(first, ".")):
		t.Errorf("error.param %v, want %s", e.Error.Param, strings.Join(first, "."))
	}
	return got, e
}

// A request the engine refuses (a 400, such as a prompt over its
// context) is not retried elsewhere and is a 422 in the same shapes,
// naming each question.
func TestEngineRejects(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{Fault: fakeengine.Status, Status: http.StatusBadRequest})
	other := startNode(t, "other", fakeengine.OpenAI, fakeengine.Behavior{}, fallback)
	s := serve(t, setup{nodes: []node{n, other}})
	r := s.ask(t, `{"model":"fake","state":"s","questions":{"q":{"type":"noul"},"c":{"type":"choice","criteria":{"a":null,"b":null}}}}`)
	got, e := validation(t, r)
	if want := []string{"body.questions.q value_error", "body.questions.c value_error"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("problems %v, want %v", got, want)
	}
	if !strings.Contains(e.Error.Message, "HTTP 400") {
		t.Errorf("message %q does not say the engine refused", e.Error.Message)
	}
	if len(other.fake.Inferences()) != 0 {
		t.Error("a request the engine refused was tried on another node")
	}
}

// A choice with more options than one engine call can read is answered
// in rounds stitched through an anchor; where the rounds share one prompt
// (llama.cpp, whose grammar holds each call to some of the labels, and an
// openai node with a constraint) the result is exact.
func TestChoiceInRounds(t *testing.T) {
	// Option i gets weight i+1 of 300 (1+2+...+24), by label, as one
	// softmax over the vocabulary gives it whichever labels a call asks.
	weights := map[string]float64{}
	labels := "ABCDEFGHIJKLMNOPQRSTUVWX"
	for i := range 24 {
		weights[labels[i:i+1]] = float64(i+1) / 300
	}
	for _, tc := range []struct {
		name  string
		d     fakeengine.Dialect
		edit  func(*config.Node)
		calls int
	}{
		{"llamacpp, 10 labels a call", fakeengine.LlamaCpp, func(c *config.Node) { c.MaxLabels = 10 }, 3},
		{"openai, structured outputs", fakeengine.OpenAI, func(c *config.Node) { c.Constrain = "structured_outputs" }, 2},
		{"openai, guided choice", fakeengine.OpenAI, func(c *config.Node) { c.Constrain = "guided_choice" }, 2},
		{"llamacpp, every label in one call", fakeengine.LlamaCpp, func(c *config.Node) {}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "n", tc.d, fakeengine.Behavior{Logprobs: fakeengine.ByLabel(weights)}, tc.edit)
			s := serve(t, setup{nodes: []node{n}})
			r := s.ask(t, choiceOf(24))
			var a struct {
				Answers struct {
					Big struct {
						Choice        string
						Confidence    float64
						Probabilities map[string]float64
					}
				}
			}
			if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK {
				t.Fatalf("%s: %v", r, err)
			}
			// (i+1)/300 to 2 decimals by largest remainder, summing to 1:
			// floors give 0 for i < 2, .01 up to i = 5, ...; 100 units in all.
			want := map[string]float64{}
			for i := range 24 {
				want[fmt.Sprintf("option %d", i)] = float64(i+1) / 300
			}
			got := a.Answers.Big
			for k, w := range want {
				if math.Abs(got.Probabilities[k]-w) > .01 {
					t.Errorf("%s: %v, want %.4f to 2 decimals", k, got.Probabilities[k], w)
				}
			}
			// Choice confidence (24 * 24/300 - 1)/23 = .04. On a
			// post-mask or a separately prompted round a wrong stitch
			// would move the argmax or the confidence.
			if got.Choice != "option 23" || got.Confidence != .04 || got.Probabilities["option 23"] != .08 {
				t.Errorf("answer %+v", got)
			}
			// A constrained node's probe of its constraint, sent after
			// the request, is no call of the request's.
			calls := 0
			for _, r := range n.fake.Inferences() {
				if r.User != fleet.ConstraintProbe.User() {
					calls++
				}
			}
			if calls != tc.calls {
				t.Errorf("%d engine calls, want %d", calls, tc.calls)
			}
		})
	}
}

// Where each round shows only its own options (an openai node without a
// constraint) the stitch assumes Luce's axiom, which a uniform
// distribution obeys: 24 options come back uniform, 1/24 = .0417 each,
// printed as 24 floors of .04 plus the 4 units left for the first four.
func TestChoiceInSeparateRounds(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{Logprobs: fakeengine.Uniform})
	s := serve(t, setup{nodes: []node{n}})
	r := s.ask(t, choiceOf(24))
	var a struct {
		Answers struct {
			Big struct {
				Choice        string
				Probabilities map[string]float64
			}
		}
	}
	if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK {
		t.Fatalf("%s: %v", r, err)
	}
	if p := a.Answers.Big.Probabilities; len(p) != 24 || p["option 0"] != .05 || p["option 3"] != .05 || p["option 4"] != .04 || a.Answers.Big.Choice != "option 0" {
		t.Errorf("answer %+v", a.Answers.Big)
	}
	if calls := len(n.fake.Inferences()); calls != 2 {
		t.Errorf("%d engine calls, want 2 rounds of at most 20 labels", calls)
	}
}

// With keys configured, a request with a wrong key (and one to the model
// list without a key) is a 401 in both error shapes, a System One
// request without a key hosted Jev's 403; a configured key is accepted as a bearer
// token or in X-Api-Key, on every API route; /health stays public.
func TestAuth(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, keys: []string{"key-one", "key-two"}})
	const q = `{"model":"fake","state":"s","questions":{"q":{"type":"noul"}}}`
	for _, tc := range []struct {
		name   string
		header []string
		ok     bool
	}{
		{"no key", nil, false},
		{"wrong key", []string{"Authorization: Bearer key-three"}, false},
		{"a key that is a prefix of one", []string{"Authorization: Bearer key-"}, false},
		{"not a bearer token", []string{"Authorization: Basic key-one"}, false},
		{"bearer", []string{"Authorization: Bearer key-one"}, true},
		{"x-api-key", []string{"X-Api-Key: key-two"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, r := range []reply{s.ask(t, q, tc.header...), s.do(t, http.MethodGet, "/v1/models", "", tc.header...)} {
				if tc.ok {
					if r.status != http.StatusOK {
						t.Errorf("got %s, want 200", r)
					}
					continue
				}
				if i == 0 && tc.header == nil { // hosted Jev's 403 (TestSystemOneWithoutKeyIs403)
					wantError(t, r, http.StatusForbidden, "authentication_error", "API key")
					continue
				}
				if i == 0 {
					wantError(t, r, http.StatusUnauthorized, "authentication_error", "API key")
				} else if e := openAIError(t, r); r.status != http.StatusUnauthorized || str(e.Code) != "invalid_api_key" ||
					!strings.Contains(string(r.body), `"detail":{"error_type":"authentication_error"`) {
					// Both wires' clients read the model list's errors.
					t.Errorf("the model list: %s", r)
				}
				if r.header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			}
		})
	}
	if r := s.do(t, http.MethodGet, "/health", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"auth":true`) {
		t.Errorf("health without a key: %s", r)
	}
}

// Without keys, auth is off: no header is needed anywhere.
func TestAuthOffWithoutKeys(t *testing.T) {
	s := serve(t, setup{nodes: []node{startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})}})
	if r := s.ask(t, `{"model":"fake","state":"s","questions":{"q":{"type":"noul"}}}`); r.status != http.StatusOK {
		t.Errorf("systemone without a key: %s", r)
	}
	if r := s.do(t, http.MethodGet, "/v1/models", ""); r.status != http.StatusOK {
		t.Errorf("models without a key: %s", r)
	}
	if r := s.do(t, http.MethodGet, "/health", ""); !strings.Contains(string(r.body), `"auth":false`) {
		t.Errorf("health: %s", r)
	}
}

// A key over its rate gets a 429 with Retry-After in seconds (and
// retry-after-ms); other keys are not held back by it.
func TestRateLimit(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, keys: []string{"a", "b"}, rate: 0.001, burst: 1})
	const q = `{"model":"fake","state":"s","questions":{"q":{"type":"noul"}}}`
	if r := s.ask(t, q, "Authorization: Bearer a"); r.status != http.StatusOK {
		t.Fatalf("first request: %s", r)
	}
	r := s.ask(t, q, "Authorization: Bearer a")
	wantError(t, r, http.StatusTooManyRequests, "rate_limit_error", "retry after")
	secs, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || secs < 1 {
		t.Errorf("Retry-After %q is not a whole number of seconds", r.header.Get("Retry-After"))
	}
	if ms, err := strconv.Atoi(r.header.Get("Retry-After-Ms")); err != nil || ms <= 0 || ms > secs*1000 {
		t.Errorf("Retry-After-Ms %q with Retry-After %d", r.header.Get("Retry-After-Ms"), secs)
	}
	if r := s.ask(t, q, "Authorization: Bearer b"); r.status != http.StatusOK {
		t.Errorf("another key: %s", r)
	}
	if len(n.fake.Inferences()) != 2 {
		t.Errorf("%d engine calls; the limited request must not reach the engine", len(n.fake.Inferences()))
	}
}

// A body over the limit is a 413 naming the limit.
func TestBodyTooLarge(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, maxBody: 256})
	big := `{"model":"fake","state":"` + strings.Repeat("x", 300) + `","questions":{"q":{"type":"noul"}}}`
	wantError(t, s.ask(t, big), http.StatusRequestEntityTooLarge, "request_too_large", "256 bytes")
	if r := s.ask(t, `{"model":"fake","state":"small","questions":{"q":{"type":"noul"}}}`); r.status != http.StatusOK {
		t.Errorf("a body under the limit: %s", r)
	}
}

// A model no node serves is hosted Jev's 400 api_usage_error naming it
// (jev-1.14.md section 7), an alias in the wrong case too, and before the
// request's other problems.
func TestUnknownModel(t *testing.T) {
	n := startNode(t, "n", fakeengine.Ollama, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, aliases: map[string]string{"jev-latest": fakeengine.DefaultModel}})
	for _, body := range []string{
		`{"model":"jev-9.9.9","state":"s","questions":{"q":{"type":"noul"}}}`,
		`{"model":"JEV-LATEST","state":"s","questions":{"q":{"type":"noul"}}}`,
		`{"model":"jev-9.9.9","state":"s","questions":{"q":{"type":"score","criteria":["only one"]}}}`,
	} {
		wantError(t, s.ask(t, body), http.StatusBadRequest, "api_usage_error", "Unknown model: ")
	}
	if len(n.fake.Inferences()) != 0 {
		t.Error("the engine was asked about a model it does not serve")
	}
}

// An unknown path is FastAPI's 404.
func TestUnknownPath(t *testing.T) {
	s := serve(t, setup{nodes: []node{startNode(t, "n", fakeengine.Ollama, fakeengine.Behavior{})}})
	for _, p := range []struct{ method, path string }{
		// GET / and /docs are the page and the API reference (internal/web);
		// another method there is a 405 (TestWrongMethod).
		{http.MethodGet, "/index.html"},
		{http.MethodGet, "/v2/systemone"},
		{http.MethodPost, "/v1/chat/completions"},
		{http.MethodGet, "/docs/"},
		{http.MethodGet, "/ui/missing.js"},
	} {
		r := s.do(t, p.method, p.path, "")
		if r.status != http.StatusNotFound || string(r.body) != `{"detail":"Not Found"}` {
			t.Errorf("%s %s: %s", p.method, p.path, r)
		}
	}
}

// Every error of the decide routes is in the decide contract's shape
// (schema/response.json; the batch's schema/batch-response.json), those
// the middleware answers before the handler included: a key missing, a
// rate exceeded, a body too large or in an unknown encoding, a method the
// path does not serve. Its code says the kind, its request_id is the
// request's header, and the middleware's headers are kept.
func TestDecideErrorsAreDecideShaped(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	keyed := setup{nodes: []node{n}, keys: []string{"k"}, decide: true}
	limited := keyed
	limited.rate, limited.burst = 0.001, 1
	small := setup{nodes: []node{n}, maxBody: 64, decide: true}
	big := `{"question":"` + strings.Repeat("x", 100) + `"}`
	for _, route := range []struct {
		path   string
		schema *jsonschema.Schema
	}{
		{"/v1/decide", gateway.ResponseSchema()},
		{"/v1/decide/batch", gateway.BatchResponseSchema()},
	} {
		resolved, err := route.schema.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name    string
			setup   setup
			method  string
			body    string
			headers []string
			status  int
			code    string
			header  string // a header the reply keeps
		}{
			{"no key", keyed, http.MethodPost, `{}`, nil, http.StatusUnauthorized, gateway.CodeUnauthorized, "WWW-Authenticate"},
			{"over the rate", limited, http.MethodPost, `{}`, []string{"Authorization: Bearer k"}, http.StatusTooManyRequests, gateway.CodeRateLimited, "Retry-After"},
			{"a body over the limit", small, http.MethodPost, big, nil, http.StatusRequestEntityTooLarge, gateway.CodeInvalidRequest, ""},
			{"an unknown encoding", small, http.MethodPost, `{}`, []string{"Content-Encoding: br"}, http.StatusUnsupportedMediaType, gateway.CodeInvalidRequest, ""},
			{"a wrong method", small, http.MethodGet, "", nil, http.StatusMethodNotAllowed, gateway.CodeInvalidRequest, "Allow"},
			{"an invalid request", small, http.MethodPost, `{}`, nil, http.StatusUnprocessableEntity, gateway.CodeInvalidRequest, ""},
		} {
			t.Run(strings.TrimPrefix(route.path, "/")+"/"+c.name, func(t *testing.T) {
				s := serve(t, c.setup)
				if c.status == http.StatusTooManyRequests {
					s.do(t, c.method, route.path, c.body, c.headers...) // spends the burst
				}
				r := s.do(t, c.method, route.path, c.body, c.headers...)
				if r.status != c.status {
					t.Fatalf("got %s, want %d", r, c.status)
				}
				var generic any
				if err := json.Unmarshal(r.body, &generic); err != nil {
					t.Fatal(err)
				}
				if err := resolved.Validate(generic); err != nil {
					t.Errorf("%s is not %s's shape: %v", r.body, route.path, err)
				}
				var res struct {
					Error     *gateway.Error `json:"error"`
					RequestID string         `json:"request_id"`
				}
				if err := json.Unmarshal(r.body, &res); err != nil || res.Error == nil || res.Error.Code != c.code || res.Error.Message == "" {
					t.Errorf("%s: error %+v %v, want code %s", r.body, res.Error, err, c.code)
				}
				if id := r.header.Get(systemone.RequestIDHeader); res.RequestID != id {
					t.Errorf("request_id %q, the header's %q", res.RequestID, id)
				}
				if c.header != "" && r.header.Get(c.header) == "" {
					t.Errorf("no %s header", c.header)
				}
			})
		}
	}
}

// As hosted Jev does (system-one-wire.md section 5, probed again in
// jev-1.14.md section 7), a System One request that carries no key at
// all is a 403 "Must supply an API key!", and one with a wrong key a 401:
// the official SDKs raise PermissionDeniedError for the one and
// AuthenticationError for the other. The model list answers both wires'
// clients, and OpenAI's call a missing key a 401, so it stays one.
func TestSystemOneWithoutKeyIs403(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, keys: []string{"key-one"}})
	const q = `{"model":"fake","state":"s","questions":{"q":{"type":"noul"}}}`
	for _, tc := range []struct {
		name, path string
		header     []string
		status     int
		msg        string
	}{
		{"no key", "/v1/systemone", nil, http.StatusForbidden, "Must supply an API key! Check your request and try again."},
		{"no key, batch", "/v1/systemone" + systemone.BatchPath, nil, http.StatusForbidden, "Must supply an API key! Check your request and try again."},
		{"wrong key", "/v1/systemone", []string{"Authorization: Bearer key-two"}, http.StatusUnauthorized, "Cannot authenticate with the server. Please check your API key and try again."},
		{"empty bearer", "/v1/systemone", []string{"Authorization: Bearer"}, http.StatusUnauthorized, "Cannot authenticate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, http.MethodPost, tc.path, q, tc.header...)
			if e := wantError(t, r, tc.status, "authentication_error"); e.Detail.Message != tc.msg && !strings.HasPrefix(e.Detail.Message, tc.msg) {
				t.Errorf("message %q, want %q", e.Detail.Message, tc.msg)
			}
		})
	}
	if r := s.do(t, http.MethodGet, "/v1/models", ""); r.status != http.StatusUnauthorized {
		t.Errorf("the model list without a key: %s, want 401", r)
	}
}
