package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/decisionsapi"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/outcomes"
	"system1/internal/systemone"
	"system1/internal/web"
)

// The committed document is what go generate writes now.
func TestOpenAPIUpToDate(t *testing.T) {
	committed, err := os.ReadFile("../../schema/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, web.OpenAPI()) {
		t.Fatal("schema/openapi.json is stale: run go generate ./internal/web")
	}
	s := serve(t, options{})
	if _, served := get(t, s.URL+"/openapi.json"); !bytes.Equal(served, committed) {
		t.Fatal("GET /openapi.json differs from schema/openapi.json")
	}
}

func newValidator(t *testing.T, doc []byte) validator.Validator {
	t.Helper()
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return v
}

func explain(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("\n  " + e.Message + ": " + e.Reason)
		for _, se := range e.SchemaValidationErrors {
			b.WriteString("\n    " + se.FieldPath + " (" + se.KeywordLocation + "): " + se.Reason)
		}
	}
	return b.String()
}

// The document is valid OpenAPI 3.1, by libopenapi-validator's check
// against the specification's own schema.
func TestOpenAPIValid(t *testing.T) {
	v := newValidator(t, web.OpenAPI())
	if ok, errs := v.ValidateDocument(); !ok {
		t.Fatalf("not a valid OpenAPI 3.1 document:%s", explain(errs))
	}
	paths := map[string]bool{}
	for _, p := range []string{"/v1/systemone", "/v1/decisions", "/v1/models", "/v1/decide", "/health"} {
		paths[p] = strings.Contains(string(web.OpenAPI()), `"`+p+`": {`)
	}
	for p, ok := range paths {
		if !ok {
			t.Errorf("the document has no %s", p)
		}
	}
}

const jev = `{"model":"fake","state":{"ticket":"I was charged twice."},"questions":{` +
	`"department":{"type":"choice","instructions":"Which team?","criteria":{"billing":"payments","technical":null,"sales":"new plans"}},` +
	`"urgent":{"type":"noul","instructions":"Action today?"},` +
	`"frustration":{"type":"score","criteria":["calm","annoyed",{"level":"angry"}]}}}`

// decisions is the request jev asks, on OpenAI's Decisions wire, with an
// unnamed question and a boolean value besides.
const decisions = `{"model":"fake","input":[{"role":"user","content":[{"type":"input_json","data":{"ticket":"I was charged twice."}}]}],"questions":[` +
	`{"type":"choice","name":"department","instructions":"Which team?","choices":[{"value":"billing","description":"payments"},{"value":"technical"},{"value":"sales","description":"new plans"}]},` +
	`{"type":"predicate","name":"urgent","instructions":"Action today?"},` +
	`{"type":"score","name":"frustration","levels":[{"label":"calm"},{"label":"annoyed"},{"label":"angry","description":"shouting"}]},` +
	`{"type":"choice","instructions":"Right to complain?","choices":[{"value":true},{"value":"true"},{"value":false}]}]}`

// Real exchanges with the server, over the fake engine, agree with the
// document: each request that should be valid is, and every reply, of
// every route and status, matches its response schema.
func TestOpenAPIMatchesServer(t *testing.T) {
	v := newValidator(t, web.OpenAPI())
	open := serve(t, options{nodes: 2, sick: true})
	coolDown(t, open)
	closed := serve(t, options{keys: []string{"sk-test"}, admin: true})
	logged := serve(t, options{log: true})
	answered := answeredID(t, logged)
	starting := serve(t, options{keys: []string{"sk-test"}, notReady: []httpapi.NotReady{
		{Check: httpapi.CheckDecisionLog, Detail: "the decision log could not be opened"},
		{Check: httpapi.CheckNodes, Detail: "model fake: no node serving it has answered a health probe yet (nodes: nodea)"}}})
	draining := serve(t, options{notReady: []httpapi.NotReady{{Check: httpapi.CheckDraining, Detail: "shutting down"}}})
	for _, tc := range []struct {
		name         string
		s            *server
		method, path string
		body         string
		status       int
		validRequest bool
		headers      []string
	}{
		{"systemone", open, "POST", "/v1/systemone", jev, 200, true, nil},
		{"systemone 422", open, "POST", "/v1/systemone", `{"model":"fake","questions":{}}`, 422, false, nil},
		{"systemone unknown model", open, "POST", "/v1/systemone", strings.Replace(jev, `"fake"`, `"nobody"`, 1), 400, true, nil},
		{"systemone images", open, "POST", "/v1/systemone", strings.Replace(jev, `"questions"`, `"assets":{"p":{"type":"image","format":"png","data_base64":"iVBORw0KGgo="}},"questions"`, 1), 400, false, nil},
		{"systemone refused", open, "POST", "/v1/systemone", jev, 422, true, []string{"X-System1-Min-Label-Mass: 1"}},
		{"decisions", open, "POST", "/v1/decisions", decisions, 200, true, []string{"X-System1-None-Option: true", "X-System1-Debias: off"}},
		{"decisions refused", open, "POST", "/v1/decisions", decisions, 200, true, []string{"X-System1-Min-Label-Mass: 1"}},
		{"decisions 400", open, "POST", "/v1/decisions", `{"model":"fake","input":"s","questions":[]}`, 400, false, nil},
		{"decisions 404", open, "POST", "/v1/decisions", strings.Replace(decisions, `"fake"`, `"nobody"`, 1), 404, true, nil},
		{"decisions 401", closed, "POST", "/v1/decisions", decisions, 401, true, nil},
		{"decisions 415", open, "POST", "/v1/decisions", decisions, 415, false, []string{"Content-Encoding: br"}},
		{"batch", open, "POST", "/v1/systemone/batch", batchOf(jev, `"a refund"`, `{"t":"a bug"}`), 200, true, nil},
		{"batch 422", open, "POST", "/v1/systemone/batch", batchOf(jev, slices.Repeat([]string{`"s"`}, systemone.MaxBatchStates+1)...), 422, false, nil},
		{"batch unknown model", open, "POST", "/v1/systemone/batch", strings.Replace(batchOf(jev, `"s"`), `"fake"`, `"nobody"`, 1), 400, true, nil},
		{"batch images", open, "POST", "/v1/systemone/batch", strings.Replace(batchOf(jev, `"s"`), `"questions"`, `"assets":{"p":{"type":"image","format":"png","data_base64":"iVBORw0KGgo="}},"questions"`, 1), 400, false, nil},
		{"batch refused", open, "POST", "/v1/systemone/batch", batchOf(jev, `"s"`), 200, true, []string{"X-System1-Min-Label-Mass: 1"}},
		{"batch 403", closed, "POST", "/v1/systemone/batch", batchOf(jev, `"s"`), 403, true, nil},
		{"models", open, "GET", "/v1/models", "", 200, true, nil},
		{"model", open, "GET", "/v1/models/fake", "", 200, true, nil},
		{"model 404", open, "GET", "/v1/models/nobody", "", 404, true, nil},
		{"model 401", closed, "GET", "/v1/models/fake", "", 401, true, nil},
		{"decide", open, "POST", "/v1/decide", `{"question":"Which team?","options":["billing","technical"],"context":{"t":"refund"}}`, 200, true, nil},
		{"decide yes or no", open, "POST", "/v1/decide", `{"question":"Refund?","min_confidence":0.99}`, 200, true, nil},
		{"decide 422", open, "POST", "/v1/decide", `{"question":""}`, 422, false, nil},
		{"decide 415", open, "POST", "/v1/decide", `{"question":"Refund?"}`, 415, false, []string{"Content-Encoding: br"}},
		{"systemone 415", open, "POST", "/v1/systemone", jev, 415, false, []string{"Content-Encoding: br"}},
		{"health with a cooling node", open, "GET", "/health", "", 200, true, nil},
		{"models 401", closed, "GET", "/v1/models", "", 401, true, nil},
		{"systemone 403", closed, "POST", "/v1/systemone", jev, 403, true, nil},
		{"systemone 401", closed, "POST", "/v1/systemone", jev, 401, true, []string{"Authorization: Bearer wrong"}},
		{"health, auth on", closed, "GET", "/health", "", 200, true, nil},
		{"livez", open, "GET", "/livez", "", 200, true, nil},
		{"livez, not ready", starting, "GET", "/livez", "", 200, true, nil},
		{"readyz", open, "GET", "/readyz", "", 200, true, nil},
		{"readyz, not ready", starting, "GET", "/readyz", "", 503, true, nil},
		{"readyz, not ready, with a key", starting, "GET", "/readyz", "", 503, true, []string{"Authorization: Bearer sk-test"}},
		{"readyz, draining", draining, "GET", "/readyz", "", 503, true, nil},
		{"models with a key", closed, "GET", "/v1/models", "", 200, true, []string{"Authorization: Bearer sk-test"}},
		{"models with the admin key", closed, "GET", "/v1/models", "", 200, true, []string{"Authorization: Bearer sk-admin"}},
		{"systemone 403", closed, "POST", "/v1/systemone", jev, 403, true, []string{"Authorization: Bearer sk-admin"}},
		{"batch 403", closed, "POST", "/v1/systemone/batch", batchOf(jev, `"s"`), 403, true, []string{"Authorization: Bearer sk-admin"}},
		{"decisions 403", closed, "POST", "/v1/decisions", decisions, 403, true, []string{"Authorization: Bearer sk-admin"}},
		{"decide 403", closed, "POST", "/v1/decide", `{"question":"q","options":["a","b"],"context":"c"}`, 403, false, []string{"Authorization: Bearer sk-admin"}},
		{"decide batch 403", closed, "POST", "/v1/decide/batch", `{}`, 403, false, []string{"Authorization: Bearer sk-admin"}},
		{"feedback 403", closed, "POST", "/v1/feedback", `{"request_id":"r","outcome":"a"}`, 403, true, []string{"Authorization: Bearer sk-admin"}},
		{"calibration 403", closed, "GET", "/v1/calibration", "", 403, true, []string{"Authorization: Bearer sk-admin"}},
		{"shadow 403", closed, "GET", "/v1/shadow", "", 403, true, []string{"Authorization: Bearer sk-admin"}},
		{"feedback", logged, "POST", "/v1/feedback", `{"request_id":"` + answered + `","question":"department","outcome":"billing"}`, 200, true, nil},
		{"feedback batch", logged, "POST", "/v1/feedback", `{"outcomes":[{"request_id":"` + answered + `","question":"department","outcome":"technical"}]}`, 200, true, nil},
		{"feedback 404", logged, "POST", "/v1/feedback", `{"request_id":"req_00000000000000000000000000000000","question":"q","outcome":true}`, 404, true, nil},
		{"feedback 422", logged, "POST", "/v1/feedback", `{"request_id":"` + answered + `","question":"department","outcome":"nobody"}`, 422, true, nil},
		{"feedback, log off", open, "POST", "/v1/feedback", `{"request_id":"r","outcome":"a"}`, 503, true, nil},
		{"calibration", logged, "GET", "/v1/calibration?window=1h&target_error=0.05", "", 200, true, nil},
		{"calibration 422", logged, "GET", "/v1/calibration?window=soon", "", 422, true, nil},
		{"calibration, log off", open, "GET", "/v1/calibration", "", 503, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, tc.method, tc.s.URL+tc.path, tc.body, tc.headers...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			req := request(t, tc.method, tc.path, tc.body, tc.headers)
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if tc.validRequest {
				if ok, errs := v.ValidateHttpRequest(req); !ok {
					t.Errorf("the request does not match the document:%s", explain(errs))
				}
				req = request(t, tc.method, tc.path, tc.body, tc.headers)
			}
			if ok, errs := v.ValidateHttpResponse(req, resp); !ok {
				t.Errorf("the reply does not match the document:%s\n%s", explain(errs), body)
			}
		})
	}
}

// batchOf is the batch body asking single's questions over states.
func batchOf(single string, states ...string) string {
	var body map[string]json.RawMessage
	_ = json.Unmarshal([]byte(single), &body)
	delete(body, "state")
	body["states"] = json.RawMessage("[" + strings.Join(states, ",") + "]")
	b, _ := json.Marshal(body)
	return string(b)
}

// The check above can fail: replies that break the wire are refused.
func TestOpenAPIRejects(t *testing.T) {
	v := newValidator(t, web.OpenAPI())
	for _, tc := range []struct{ name, path, body string }{
		{"systemone without usage", "/v1/systemone", `{"model":"m","answers":{"u":{"type":"noul","noul":0.5}},"latency_ms":1}`},
		{"a noul above 1", "/v1/systemone", `{"model":"m","answers":{"u":{"type":"noul","noul":1.5}},"usage":{"input_tokens":1,"output_tokens":1},"latency_ms":1}`},
		{"a choice without probabilities", "/v1/systemone", `{"model":"m","answers":{"d":{"type":"choice","choice":"a","confidence":0.1}},"usage":{"input_tokens":1,"output_tokens":1},"latency_ms":1}`},
		{"decide with an unknown status", "/v1/decide", `{"status":"maybe","decision":null,"calibrated":false,"rationale":"","provider":null,"latency_ms":0,"attempts":[],"error":null,"schema_version":"1","request_id":"r"}`},
		{"health without status", "/health", `{"auth":false}`},
		{"decisions without usage details", "/v1/decisions", `{"model":"m","answers":[{"type":"predicate","name":null,"probability":0.5}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`},
		{"a decisions answer without its name", "/v1/decisions", `{"model":"m","answers":[{"type":"predicate","probability":0.5}],"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2}}`},
		{"a score level's value not an index", "/v1/decisions", `{"model":"m","answers":[{"type":"score","name":"s","score":0.5,"confidence":0.1,"probabilities":[{"value":"0","label":"a","probability":1}]}],"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.path == "/health" {
				method = "GET"
			}
			resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(tc.body))}
			if ok, _ := v.ValidateHttpResponse(request(t, method, tc.path, "", nil), resp); ok {
				t.Fatalf("accepted %s", tc.body)
			}
		})
	}
}

func request(t *testing.T, method, path, body string, headers []string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://system1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	return req
}

// coolDown asks until the sick last node has failed and is cooling down,
// over a new state each time so that affinity does not keep the requests
// on the healthy node.
func coolDown(t *testing.T, s *server) {
	t.Helper()
	for i := range 40 {
		do(t, "POST", s.URL+"/v1/systemone", strings.Replace(jev, "charged twice.", "charged twice, case "+strconv.Itoa(i)+".", 1))
		st := s.router.States()
		if !st[len(st)-1].Healthy {
			return
		}
	}
	t.Fatal("the sick node never cooled down")
}

// answeredID asks s a System One request and returns its request id once
// the decision log has its answer (the log writes off the request path).
func answeredID(t *testing.T, s *server) string {
	t.Helper()
	resp, body := do(t, "POST", s.URL+"/v1/systemone", jev)
	id := resp.Header.Get("x-typesafe-request-id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("systemone: %d %s", resp.StatusCode, body)
	}
	check := `{"outcomes":[{"request_id":"` + id + `","question":"department","outcome":"nobody"}]}`
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// A bad outcome is refused without a write: 404 until the answer is
		// in the log, then 422.
		if resp, _ := do(t, "POST", s.URL+"/v1/feedback", check); resp.StatusCode != http.StatusNotFound {
			return id
		}
	}
	t.Fatalf("the answer to %s never reached the decision log", id)
	return ""
}

// lookup follows keys (object members, or array indexes as "0", "1", ...)
// from v, failing the test where one is missing.
func lookup(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for i, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[k]
			if !ok {
				t.Fatalf("the document has no %s", strings.Join(keys[:i+1], "/"))
			}
			v = next
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n >= len(x) {
				t.Fatalf("the document has no %s", strings.Join(keys[:i+1], "/"))
			}
			v = x[n]
		default:
			t.Fatalf("the document's %s is not an object or array", strings.Join(keys[:i], "/"))
		}
	}
	return v
}

// committedDocument is schema/openapi.json, decoded.
func committedDocument(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../schema/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// The limits schema/openapi.json states are the domain's: the request
// limits of internal/decision, the option cap every face shares, the
// decide contract's and feedback's.
func TestOpenAPILimitsAreTheDomains(t *testing.T) {
	doc := committedDocument(t)
	schemas := lookup(t, doc, "components", "schemas")
	lim := decision.DefaultLimits()
	one := func(keys ...string) any { return lookup(t, schemas, keys...) }
	question := func(kind string) any {
		for i := range lookup(t, schemas, "SystemOneRequest", "properties", "questions", "additionalProperties", "oneOf").([]any) {
			q := one("SystemOneRequest", "properties", "questions", "additionalProperties", "oneOf", strconv.Itoa(i))
			if lookup(t, q, "properties", "type", "const") == kind {
				return q
			}
		}
		t.Fatalf("SystemOneRequest has no %s question", kind)
		return nil
	}
	kib := func(n int) string { return strconv.Itoa(n/1024) + " KiB" }
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"questions at most", one("SystemOneRequest", "properties", "questions", "maxProperties"), lim.MaxQuestions},
		{"questions at least", one("SystemOneRequest", "properties", "questions", "minProperties"), 1},
		{"choice options at least", lookup(t, question("choice"), "properties", "criteria", "minProperties"), lim.MinChoiceOptions},
		{"choice options at most", lookup(t, question("choice"), "properties", "criteria", "maxProperties"), gateway.MaxOptions},
		{"score levels at least", lookup(t, question("score"), "properties", "criteria", "minItems"), lim.MinScoreLevels},
		{"score levels at most", lookup(t, question("score"), "properties", "criteria", "maxItems"), lim.MaxScoreLevels},
		{"decide question length", one("DecideRequest", "properties", "question", "maxLength"), gateway.MaxQuestionChars},
		{"decide options at least", one("DecideRequest", "properties", "options", "minItems"), gateway.MinOptions},
		{"decide options at most", one("DecideRequest", "properties", "options", "maxItems"), gateway.MaxOptions},
		{"decide option length", one("DecideRequest", "properties", "options", "items", "maxLength"), gateway.MaxOptionChars},
		{"decide request id length", one("DecideRequest", "properties", "request_id", "maxLength"), decisionlog.MaxRequestIDChars},
		{"batch states at most", one("SystemOneBatchRequest", "properties", "states", "maxItems"), systemone.MaxBatchStates},
		{"batch states at least", one("SystemOneBatchRequest", "properties", "states", "minItems"), 1},
		{"feedback outcomes at most", one("FeedbackRequest", "anyOf", "1", "properties", "outcomes", "maxItems"), outcomes.MaxFeedbackOutcomes},
		{"decisions questions at most", one("DecisionsRequest", "properties", "questions", "maxItems"), min(lim.MaxQuestions, decisionsapi.MaxQuestions)},
		{"decisions choices at most", one("DecisionsRequest", "properties", "questions", "items", "oneOf", "1", "properties", "choices", "maxItems"), decisionsapi.MaxChoices},
		{"decisions levels at most", one("DecisionsRequest", "properties", "questions", "items", "oneOf", "2", "properties", "levels", "maxItems"), lim.MaxScoreLevels},
		{"decisions safety identifier", one("DecisionsRequest", "properties", "safety_identifier", "maxLength"), decisionsapi.MaxSafetyIdentifier},
	} {
		if got, ok := c.got.(float64); !ok || got != float64(c.want.(int)) {
			t.Errorf("%s: the document says %v, the domain %v", c.name, c.got, c.want)
		}
	}
	// Sizes in bytes of JSON have no JSON Schema keyword: the descriptions
	// state them.
	for _, c := range []struct {
		name string
		desc any
		want string
	}{
		{"state", one("SystemOneRequest", "properties", "state", "description"), kib(lim.MaxStateBytes)},
		{"instructions", lookup(t, question("choice"), "properties", "instructions", "description"), kib(lim.MaxInstructionBytes)},
		{"an option", lookup(t, question("choice"), "properties", "criteria", "additionalProperties", "description"), kib(lim.MaxOptionBytes)},
	} {
		if d, _ := c.desc.(string); !strings.Contains(d, "at most "+c.want) {
			t.Errorf("%s: the document says %q, the domain's limit is %s", c.name, c.desc, c.want)
		}
	}
}

// At each limit the document and the server agree: what the document
// accepts the server answers, and what it refuses the server refuses with
// a 422.
func TestOpenAPILimitsAreTheServers(t *testing.T) {
	v := newValidator(t, web.OpenAPI())
	s := serve(t, options{})
	lim := decision.DefaultLimits()
	body := func(questions string) string {
		return `{"model":"fake","state":"I was charged twice.","questions":{` + questions + `}}`
	}
	nouls := func(n int) string {
		qs := make([]string, n)
		for i := range qs {
			qs[i] = `"q` + strconv.Itoa(i) + `":{"type":"noul"}`
		}
		return body(strings.Join(qs, ","))
	}
	choice := func(n int) string {
		opts := make([]string, n)
		for i := range opts {
			opts[i] = `"o` + strconv.Itoa(i) + `":null`
		}
		return body(`"d":{"type":"choice","criteria":{` + strings.Join(opts, ",") + `}}`)
	}
	score := func(n int) string {
		return body(`"f":{"type":"score","criteria":[` + strings.TrimSuffix(strings.Repeat(`"level",`, n), ",") + `]}`)
	}
	for _, c := range []struct {
		name  string
		body  string
		valid bool
	}{
		{"the most questions", nouls(lim.MaxQuestions), true},
		{"one question too many", nouls(lim.MaxQuestions + 1), false},
		{"the most options", choice(gateway.MaxOptions), true},
		{"one option too many", choice(gateway.MaxOptions + 1), false},
		{"too few options", choice(lim.MinChoiceOptions - 1), false},
		{"the most levels", score(lim.MaxScoreLevels), true},
		{"one level too many", score(lim.MaxScoreLevels + 1), false},
		{"too few levels", score(lim.MinScoreLevels - 1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			docOK, errs := v.ValidateHttpRequest(request(t, "POST", "/v1/systemone", c.body, nil))
			resp, reply := do(t, "POST", s.URL+"/v1/systemone", c.body)
			serverOK := resp.StatusCode != http.StatusUnprocessableEntity
			// A refusal must be for the limit, not for a broken body.
			limited := bytes.Contains(reply, []byte(`"too_long"`)) || bytes.Contains(reply, []byte(`"too_short"`))
			if docOK != c.valid || serverOK != c.valid || !c.valid && !limited {
				t.Errorf("the document accepts it: %v%s; the server answers %d: %.300s", docOK, explain(errs), resp.StatusCode, reply)
			}
		})
	}
}

// Every object schema says which members it has or that any are allowed:
// openapi-typescript reads one that says neither as an object with no
// members, and the README's state {"ticket": ...} would not compile.
func TestOpenAPIObjectsSayTheirMembers(t *testing.T) {
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			isObject := x["type"] == "object"
			if types, ok := x["type"].([]any); ok {
				isObject = slices.Contains(types, any("object"))
			}
			_, props := x["properties"]
			_, extra := x["additionalProperties"]
			_, pattern := x["patternProperties"]
			if isObject && !props && !extra && !pattern {
				t.Errorf("%s is an object schema without properties or additionalProperties", path)
			}
			for k, e := range x {
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(path+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", committedDocument(t))
}

// The document's license is the repository's LICENSE.
func TestOpenAPILicense(t *testing.T) {
	b, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	id := lookup(t, committedDocument(t), "info", "license", "identifier")
	if id != "Apache-2.0" || !strings.Contains(string(b), "Apache License") || !strings.Contains(string(b), "Version 2.0,") {
		t.Fatalf("the document's license is %v; LICENSE begins %.120q", id, b)
	}
}

// GET /health's description says what a caller without a key gets from a
// server with keys: every member of that reply, each named.
func TestOpenAPIHealthSaysWhatACallerWithoutAKeyGets(t *testing.T) {
	s := serve(t, options{keys: []string{"sk-test"}})
	resp, body := get(t, s.URL+"/health")
	var reply map[string]any
	if err := json.Unmarshal(body, &reply); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /health: %d %s", resp.StatusCode, body)
	}
	var doc map[string]any
	if err := json.Unmarshal(web.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	desc, _ := lookup(t, doc, "paths", "/health", "get", "description").(string)
	for member := range reply {
		if !strings.Contains(desc, member) {
			t.Errorf("a caller without a key gets %s (%s); the description does not say so: %q", member, body, desc)
		}
	}
}
