package httpapi_test

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/cases"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionsapi"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/systemone"
	"system1/internal/testbin"
)

// A node is one fake engine and system1's configuration of it.
type node struct {
	fake *fakeengine.Fake
	cfg  config.Node
}

// startNode starts a fake engine of dialect d serving the model "fake",
// configured in system1 as claiming that model; edit adjusts the node's
// configuration.
func startNode(t testing.TB, name string, d fakeengine.Dialect, b fakeengine.Behavior, edit ...func(*config.Node)) node {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: d, Behavior: b})
	t.Cleanup(f.Close)
	c := config.Node{Name: name, URL: f.URL, Dialect: string(d), Models: []string{fakeengine.DefaultModel}}
	for _, e := range edit {
		e(&c)
	}
	return node{fake: f, cfg: c}
}

// discovered makes a node list its models rather than claim them.
func discovered(c *config.Node) { c.Models = nil }

// fallback puts a node behind those of the default priority, so that it
// is tried only when they fail.
func fallback(c *config.Node) { c.Priority = 1 }

// setup is what a test varies of system1.
type setup struct {
	nodes   []node
	aliases map[string]string
	keys    []string
	rate    float64
	burst   int
	maxBody int64
	debias  fleet.Debias
	prior   fleet.Prior
	// maxQuestions is the configuration's max_questions; 0 the default.
	maxQuestions int
	// requestTimeout bounds a request; 0 is the server's default. A test
	// of what a request may ask, not of how fast it is answered, gives a
	// long one, so that a loaded machine cannot fail it.
	requestTimeout time.Duration
	// writeTimeout is the http.Server's WriteTimeout, as system1 serve
	// sets one; 0 is none.
	writeTimeout time.Duration
	// probe runs the background probe once before the server starts, so
	// that the nodes' builds are fingerprinted.
	probe bool
	// decide serves /v1/decide and /v1/decide/batch: a gateway whose one
	// link asks the model "fake" of the nodes.
	decide bool
	// decideConfig is the configuration of decide's gateway; "" is one
	// whose one link asks the model "fake" with a minute to answer.
	decideConfig string
	// cascades are models made of the nodes' (answer.Cascade).
	cascades []answer.Cascade
}

// testPolicy is the router's default policy with a cooldown longer than
// any test, so that a cooled node stays cooled while a test looks.
var testPolicy = fleet.Policy{AllowedFails: fleet.DefaultPolicy.AllowedFails, Window: time.Hour, Cooldown: time.Hour}

// system1 is a running server and a client that checks every reply.
type system1 struct {
	URL    string
	client *http.Client
}

// serve runs the real HTTP server over the real router and dialect
// engines, as system1 serve builds them, in front of the fakes.
func serve(t testing.TB, s setup) *system1 {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var nodes []*fleet.Node
	for _, n := range s.nodes {
		fn, err := fleet.NewNode(n.cfg, func(string) string { return "" }, hc)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, fn)
	}
	router := fleet.New(nodes, fleet.Options{Aliases: s.aliases, Policy: testPolicy, Debias: s.debias, Prior: s.prior, MaxQuestions: s.maxQuestions})
	router.Refresh(t.Context())
	if s.probe {
		router.Probe(t.Context())
	}
	svc := answer.New(answer.Options{Router: router, Cascades: s.cascades})
	var g *gateway.Gateway
	if s.decide {
		cfg, err := config.Parse([]byte(cmp.Or(s.decideConfig, "gateway:\n  threshold: 0.5\n  deadline: 60s\n  chain:\n    - {name: local, model: fake, timeout: 60s}\n")))
		if err != nil {
			t.Fatal(err)
		}
		g = gateway.New(gateway.Options{Config: cfg, Answer: svc})
	}
	api := httpapi.New(httpapi.Options{
		Answer:         svc,
		Decide:         g,
		Keys:           plainKeys(s.keys),
		RatePerSecond:  s.rate,
		Burst:          s.burst,
		Rounding:       2, // system1 serve's default: Jev's 2 decimals
		MaxBodyBytes:   s.maxBody,
		RequestTimeout: s.requestTimeout,
		Version:        "test",
	})
	srv := httptest.NewUnstartedServer(api)
	srv.Config.WriteTimeout = s.writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(hc.CloseIdleConnections)
	return &system1{URL: srv.URL, client: &http.Client{Transport: checker{t: t, base: http.DefaultTransport}}}
}

// reply is a response, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends a request with the given headers ("Name: value").
func (s *system1) do(t testing.TB, method, path, body string, headers ...string) reply {
	t.Helper()
	resp, b := testbin.Do(t, s.client, method, s.URL+path, body, headers...)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// okReply sends a request through http.DefaultClient (testbin.Do) and
// returns the reply's header and body, failing t on any status but 200.
func okReply(t testing.TB, method, url, body string) (http.Header, []byte) {
	t.Helper()
	resp, b := testbin.Do(t, http.DefaultClient, method, url, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.Header, b
}

// sendFeedback reports each case's expected outcome of its first
// question on base's /v1/feedback, for the answer ids[i] names.
func sendFeedback(t testing.TB, base string, cs []cases.Case, ids []string) {
	t.Helper()
	var items []map[string]any
	for i, c := range cs {
		q := c.Request.Questions[0]
		items = append(items, map[string]any{"request_id": ids[i], "question": q.ID, "outcome": q.Options[c.Expected[0]].Key})
	}
	body, _ := json.Marshal(map[string]any{"outcomes": items})
	okReply(t, http.MethodPost, base+"/v1/feedback", string(body))
}

// ask posts a System One request.
func (s *system1) ask(t testing.TB, body string, headers ...string) reply {
	t.Helper()
	return s.do(t, http.MethodPost, "/v1/systemone", body, headers...)
}

// checker is the test client's transport: it applies the checks every
// reply must pass to each response on its way to the test, so that no
// test can receive a 200 from /v1/systemone that a real client would
// reject.
type checker struct {
	t    testing.TB
	base http.RoundTripper
}

var requestID = regexp.MustCompile(`^req_[0-9a-f]{32}$`)

func (c checker) RoundTrip(req *http.Request) (*http.Response, error) {
	var sent []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		sent, _ = io.ReadAll(rc)
		rc.Close()
		if enc := strings.ToLower(req.Header.Get("Content-Encoding")); enc == "gzip" || enc == "x-gzip" {
			if zr, err := gzip.NewReader(bytes.NewReader(sent)); err == nil {
				sent, _ = io.ReadAll(io.LimitReader(zr, 1<<20)) // a zip bomb test's is cut
			}
		}
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	where := req.Method + " " + req.URL.Path
	if id := resp.Header.Get("X-Typesafe-Request-Id"); !requestID.MatchString(id) {
		c.t.Errorf("%s: x-typesafe-request-id %q does not match %s", where, id, requestID)
	}
	if req.URL.Path != "/metrics" {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			c.t.Errorf("%s: content type %q", where, ct)
		}
		if !json.Valid(body) {
			c.t.Errorf("%s: body is not JSON: %s", where, body)
		}
	}
	if openAIPath(req.URL.Path) {
		if err := checkDecisionsReply(resp, sent, body); err != nil {
			c.t.Errorf("%s: %v\nrequest: %s\nreply: %d %s", where, err, sent, resp.StatusCode, body)
		}
	}
	if resp.StatusCode == http.StatusOK {
		switch where {
		case "POST /v1/systemone":
			if err := checkAnswer(sent, body); err != nil {
				c.t.Errorf("%s: a 200 that clients would reject: %v\nrequest: %s\nreply: %s", where, err, sent, body)
			}
		case "GET /v1/models":
			if err := checkModels(body); err != nil {
				c.t.Errorf("%s: %v\n%s", where, err, body)
			}
		}
	}
	return resp, nil
}

// checkAnswer applies to a 200 reply to a System One request every check
// real clients apply (systemone.ParseResponse: JDE's parseAnswers and
// checkAnswers, jev-ultrafast's validate_choice, promptfoo's, the Python
// SDK's strict types), then system1's own stricter obligations (wire doc
// section 6): no confidence on a noul; every number rounded to 2
// decimals; probabilities summing to 1 within 1e-9; the choice an argmax
// of the printed values; the score legend echoing the criteria; token
// counts present as JSON integers; answers in question order.
func checkAnswer(sent, body []byte) error {
	p := systemone.ParseRequest(sent)
	if len(p.Problems) > 0 {
		return fmt.Errorf("a 200 to a request with problems %v", p.Problems)
	}
	if _, err := systemone.ParseResponse(p.Request, body); err != nil {
		return fmt.Errorf("systemone.ParseResponse: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top struct {
		Model   string
		Answers json.RawMessage
		Usage   map[string]any
	}
	if err := dec.Decode(&top); err != nil {
		return err
	}
	for _, k := range []string{"input_tokens", "output_tokens"} {
		n, ok := top.Usage[k].(json.Number)
		if _, err := n.Int64(); !ok || err != nil || strings.ContainsAny(n.String(), ".eE-") {
			return fmt.Errorf("usage.%s is %v, not a JSON integer", k, top.Usage[k])
		}
	}
	if e, ok := top.Usage["estimated"]; ok && e != true {
		return fmt.Errorf("usage.estimated is %v; it is true or absent", e)
	}
	keys, err := objectKeys(top.Answers)
	if err != nil {
		return err
	}
	var asked []string
	for _, q := range p.Questions {
		asked = append(asked, q.ID)
	}
	if !slices.Equal(keys, asked) {
		return fmt.Errorf("answers in order %v, asked %v", keys, asked)
	}
	var answers map[string]map[string]json.RawMessage
	if err := json.Unmarshal(top.Answers, &answers); err != nil {
		return err
	}
	for _, q := range p.Questions {
		if err := checkOne(q, answers[q.ID]); err != nil {
			return fmt.Errorf("answers.%s: %w", q.ID, err)
		}
	}
	return nil
}

func checkOne(q decision.Question, a map[string]json.RawMessage) error {
	want := map[decision.Kind][]string{
		decision.Noul:   {"noul", "type"},
		decision.Choice: {"choice", "confidence", "probabilities", "type"},
		decision.Score:  {"confidence", "legend", "probabilities", "score", "type"},
	}[q.Kind]
	var got []string
	for k := range a {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("fields %v, want %v", got, want)
	}
	for _, k := range []string{"noul", "score", "confidence"} {
		if raw, ok := a[k]; ok {
			if err := twoPlaces(raw); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	if q.Kind == decision.Noul {
		return nil
	}
	var probs map[string]json.RawMessage
	if err := json.Unmarshal(a["probabilities"], &probs); err != nil {
		return err
	}
	var sum, top float64
	for _, raw := range probs {
		if err := twoPlaces(raw); err != nil {
			return fmt.Errorf("probabilities: %w", err)
		}
		var p float64
		_ = json.Unmarshal(raw, &p)
		sum += p
		top = math.Max(top, p)
	}
	if math.Abs(sum-1) > 1e-9 {
		return fmt.Errorf("probabilities sum to %v", sum)
	}
	if q.Kind == decision.Choice {
		var c string
		_ = json.Unmarshal(a["choice"], &c)
		var pc float64
		_ = json.Unmarshal(probs[c], &pc)
		if pc != top {
			return fmt.Errorf("choice %q has %v, the largest printed is %v", c, pc, top)
		}
		return nil
	}
	var legend map[string]json.RawMessage
	if err := json.Unmarshal(a["legend"], &legend); err != nil {
		return err
	}
	for _, o := range q.Options {
		if !jsonEqual(legend[o.Key], o.Legend) {
			return fmt.Errorf("legend.%s is %s, the criterion sent was %s", o.Key, legend[o.Key], o.Legend)
		}
	}
	return nil
}

// twoPlaces reports whether a JSON number is printed to at most 2
// decimals.
func twoPlaces(raw json.RawMessage) error {
	var x float64
	if err := json.Unmarshal(raw, &x); err != nil {
		return err
	}
	if math.Abs(x*100-math.Round(x*100)) > 1e-9 {
		return fmt.Errorf("%s is not rounded to 2 decimals", raw)
	}
	return nil
}

// objectKeys lists a JSON object's keys in the order they appear.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// modelList is GET /v1/models in both shapes.
type modelList struct {
	Models []struct {
		Name         string                 `json:"name"`
		Description  string                 `json:"description"`
		ReleaseDate  string                 `json:"release_date"`
		Capabilities *decision.Capabilities `json:"capabilities"`
	} `json:"models"`
	Object string `json:"object"`
	Data   []struct {
		ID           string                 `json:"id"`
		Object       string                 `json:"object"`
		Created      int64                  `json:"created"`
		OwnedBy      string                 `json:"owned_by"`
		Capabilities *decision.Capabilities `json:"capabilities"`
	} `json:"data"`
}

// checkModels checks GET /v1/models against both shapes clients read:
// Jev's models[] with the three required strings, and OpenAI's list;
// each entry says what the model can be asked in its wire's words, no
// images, within the wire's limits.
func checkModels(body []byte) error {
	var l modelList
	if err := json.Unmarshal(body, &l); err != nil {
		return err
	}
	if l.Object != "list" || len(l.Models) != len(l.Data) {
		return fmt.Errorf("object %q, %d models and %d data", l.Object, len(l.Models), len(l.Data))
	}
	for i, m := range l.Models {
		if _, err := time.Parse(time.DateOnly, m.ReleaseDate); err != nil || m.Name == "" || m.Description == "" {
			return fmt.Errorf("models[%d] = %+v", i, m)
		}
		d := l.Data[i]
		if d.ID != m.Name || d.Object != "model" || d.OwnedBy == "" || d.Created <= 0 {
			return fmt.Errorf("data[%d] = %+v", i, d)
		}
		jev, oai := m.Capabilities, d.Capabilities
		if jev == nil || oai == nil || !slices.Equal(jev.QuestionTypes, []string{"noul", "choice", "score"}) ||
			!slices.Equal(oai.QuestionTypes, []string{"predicate", "choice", "score"}) || jev.Images || oai.Images || jev.Box || oai.Box ||
			jev.MaxLevels != 10 || oai.MaxQuestions > decisionsapi.MaxQuestions || oai.MaxChoices > decisionsapi.MaxChoices ||
			oai.MaxQuestions != min(jev.MaxQuestions, decisionsapi.MaxQuestions) || jev.MaxChoices < 2 {
			return fmt.Errorf("capabilities of %s: %+v and %+v", m.Name, jev, oai)
		}
	}
	return nil
}

// errorBody is a non-422 error in both shapes system1 writes.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
	Detail struct {
		ErrorType string `json:"error_type"`
		Message   string `json:"message"`
	} `json:"detail"`
}

// wantError checks an error reply's status, type and message, and that
// both shapes agree.
func wantError(t testing.TB, r reply, status int, typ string, msgHas ...string) errorBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %s, want status %d", r, status)
	}
	var e errorBody
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	if e.Error.Type != typ || e.Detail.ErrorType != typ || e.Error.Message != e.Detail.Message {
		t.Errorf("error body %s, want type %s in both shapes", r.body, typ)
	}
	for _, s := range msgHas {
		if !strings.Contains(e.Error.Message, s) {
			t.Errorf("message %q does not mention %q", e.Error.Message, s)
		}
	}
	return e
}

// The checks catch what they promise to: each row breaks one obligation
// in a reply that otherwise passes.
func TestCheckAnswerRejects(t *testing.T) {
	const sent = `{"model":"m","state":"s","questions":{"u":{"type":"noul"},` +
		`"d":{"type":"choice","criteria":{"a":null,"b":null}},"s":{"type":"score","criteria":["lo",{"x":1}]}}}`
	const good = `{"model":"m","answers":{"u":{"type":"noul","noul":0.67},` +
		`"d":{"type":"choice","choice":"a","confidence":0.34,"probabilities":{"a":0.67,"b":0.33}},` +
		`"s":{"type":"score","score":0.33,"confidence":0.34,"legend":{"0":"lo","1":{"x":1}},"probabilities":{"0":0.67,"1":0.33}}},` +
		`"usage":{"input_tokens":10,"output_tokens":3},"latency_ms":1}`
	if err := checkAnswer([]byte(sent), []byte(good)); err != nil {
		t.Fatalf("the good reply fails: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"a client check (ParseResponse)", `"choice":"a"`, `"choice":"c"`},
		{"confidence on a noul", `"noul":0.67}`, `"noul":0.67,"confidence":0.34}`},
		{"three decimals", `"a":0.67,"b":0.33`, `"a":0.667,"b":0.333`},
		{"sum off by 1e-4", `"0":0.67,"1":0.33`, `"0":0.67,"1":0.3301`},
		{"choice not the printed argmax", `"a":0.67,"b":0.33`, `"a":0.33,"b":0.67`},
		{"token count as a float", `"input_tokens":10`, `"input_tokens":10.0`},
		{"token count missing", `"input_tokens":10,`, ``},
		{"answers out of order", `"u":{"type":"noul","noul":0.67},"d":`, `"d":`},
		{"legend not echoed", `"1":{"x":1}}`, `"1":{"x":2}}`},
		{"estimated false", `"output_tokens":3}`, `"output_tokens":3,"estimated":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Replace(good, tc.from, tc.to, 1)
			if tc.name == "answers out of order" {
				body = strings.Replace(body, `"s":{"type":"score"`, `"u":{"type":"noul","noul":0.67},"s":{"type":"score"`, 1)
			}
			if body == good {
				t.Fatal("the row changes nothing")
			}
			if err := checkAnswer([]byte(sent), []byte(body)); err == nil {
				t.Fatalf("accepted %s", body)
			}
		})
	}
}

// openAIPath reports whether a path is under a route OpenAI's clients
// call: /v1/decisions and /v1/models, and anything below them.
func openAIPath(p string) bool {
	for _, root := range []string{"/v1/decisions", "/v1/models"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}

// checkDecisionsReply applies to every reply under /v1/decisions and
// /v1/models what OpenAI's clients need (docs/decisions-wire.md):
// x-request-id on every reply, the same id as x-typesafe-request-id; an
// error in OpenAI's envelope, its four fields present; a 200 that passes every client's
// checks (decisionsapi.CheckResponse, where every question is named:
// that reader matches answers to questions by name), answers in order
// named as asked, null for an unnamed question.
func checkDecisionsReply(resp *http.Response, sent, body []byte) error {
	if id := resp.Header.Get("X-Request-Id"); !requestID.MatchString(id) || id != resp.Header.Get("X-Typesafe-Request-Id") {
		return fmt.Errorf("x-request-id %q", id)
	}
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/v1/decisions" {
		if resp.StatusCode == http.StatusOK {
			return nil // a model list or a model
		}
		var env struct {
			Error map[string]json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			return err
		}
		for _, k := range []string{"message", "type", "param", "code"} {
			if _, ok := env.Error[k]; !ok {
				return fmt.Errorf("the error envelope has no %s", k)
			}
		}
		return nil
	}
	p := decisionsapi.ParseRequest(sent)
	if e := p.Validate(decision.DefaultLimits()); e != nil {
		return fmt.Errorf("a 200 to a request with problems: %v", e)
	}
	var top struct {
		Answers []struct {
			Name *string `json:"name"`
			Type string  `json:"type"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return err
	}
	if len(top.Answers) != len(p.Questions) {
		return fmt.Errorf("%d answers for %d questions", len(top.Answers), len(p.Questions))
	}
	named := true
	for i, a := range top.Answers {
		asked := p.Asked[i]
		named = named && asked.Named && asked.Name != "" // a name "" is not its question's id
		if (a.Name == nil) == asked.Named || (a.Name != nil && *a.Name != asked.Name) {
			return fmt.Errorf("answers[%d] is named %v, asked %+v", i, a.Name, asked)
		}
	}
	if named {
		if err := decisionsapi.CheckResponse(p.Request, body); err != nil {
			return fmt.Errorf("decisionsapi.CheckResponse: %w", err)
		}
	}
	return nil
}

// plainKeys are keys with every scope, as plain strings in keys are.
func plainKeys(secrets []string) []httpapi.Key {
	var out []httpapi.Key
	for i, k := range secrets {
		out = append(out, httpapi.Key{Name: fmt.Sprintf("keys[%d]", i), Secret: k})
	}
	return out
}
