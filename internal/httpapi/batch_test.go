package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/systemone"
)

// batchQuestions is a questions map whose answers depend on the state
// under fakeengine.Leaning: "about <option>" triples that option.
const batchQuestions = `{"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":null,"tech":null,"sales":null}},` +
	`"urgent":{"type":"noul","instructions":"Today?"},"mood":{"type":"score","criteria":["calm","annoyed","angry"]}}`

// batchReply is a POST /v1/systemone/batch reply.
type batchReply struct {
	Results    []json.RawMessage `json:"results"`
	RequestIDs []string          `json:"request_ids"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// withoutLatency is a System One response with its latency_ms taken out,
// which differs between two requests answered alike.
func withoutLatency(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	delete(m, "latency_ms")
	return m
}

// The batch route answers each state exactly as /v1/systemone answers it
// alone, in the states' order, each under a request id of its own, with
// the usage summed; every result passes the checks real clients apply to
// a /v1/systemone reply.
func TestBatchAnswersEachStateAsAlone(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.Leaning})
	s := serve(t, setup{nodes: []node{n}, requestTimeout: time.Minute})
	states := []string{`"about billing, twice"`, `{"body":"about tech"}`, `["about sales"]`, `"nothing"`, `"about tech and about sales"`}
	r := s.do(t, http.MethodPost, "/v1/systemone/batch",
		fmt.Sprintf(`{"model":"fake","states":[%s],"questions":%s}`, strings.Join(states, ","), batchQuestions))
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	var got batchReply
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != len(states) || len(got.RequestIDs) != len(states) {
		t.Fatalf("%d results, %d ids for %d states", len(got.Results), len(got.RequestIDs), len(states))
	}
	seen := map[string]bool{r.header.Get(systemone.RequestIDHeader): true}
	inputs, outputs := 0, 0
	for i, st := range states {
		single := fmt.Sprintf(`{"model":"fake","state":%s,"questions":%s}`, st, batchQuestions)
		if err := checkAnswer([]byte(single), got.Results[i]); err != nil {
			t.Errorf("state %d: a result clients would reject: %v\n%s", i, err, got.Results[i])
		}
		alone := s.ask(t, single)
		if alone.status != http.StatusOK {
			t.Fatal(alone)
		}
		a, b := withoutLatency(t, got.Results[i]), withoutLatency(t, alone.body)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("state %d: batch %s\nalone %s", i, got.Results[i], alone.body)
		}
		var u struct {
			Usage struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(got.Results[i], &u)
		inputs, outputs = inputs+u.Usage.InputTokens, outputs+u.Usage.OutputTokens
		id := got.RequestIDs[i]
		if !requestID.MatchString(id) || seen[id] {
			t.Errorf("state %d: request id %q is not a fresh request id", i, id)
		}
		seen[id] = true
	}
	if got.Usage.InputTokens != inputs || got.Usage.OutputTokens != outputs || inputs == 0 {
		t.Errorf("usage %+v, the results sum to %d in, %d out", got.Usage, inputs, outputs)
	}
	// The states were told apart: Leaning's answers differ with them.
	if fmt.Sprint(withoutLatency(t, got.Results[0])["answers"]) == fmt.Sprint(withoutLatency(t, got.Results[1])["answers"]) {
		t.Errorf("two states that lean apart got one answer: %s", got.Results[0])
	}
}

// A batch is checked whole before any state is asked: each problem is
// named, a state's as states.<i>, and more than systemone.MaxBatchStates
// states are refused naming the limit. Nothing reaches the engine.
func TestBatchValidation(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	many := strings.TrimSuffix(strings.Repeat(`"s",`, systemone.MaxBatchStates+1), ",")
	big := `"` + strings.Repeat("x", decision.DefaultLimits().MaxStateBytes) + `"`
	q := `{"u":{"type":"noul"}}`
	for _, tc := range []struct {
		name, body string
		loc        []string // the problems' locations, each a body path
		msg        string
	}{
		{"no states", `{"model":"fake","questions":` + q + `}`, []string{"states"}, "Field required"},
		{"a single body", `{"model":"fake","state":"s","questions":` + q + `}`, []string{"states"}, "Field required"},
		{"states not an array", `{"model":"fake","states":"s","questions":` + q + `}`, []string{"states"}, "array"},
		{"no state", `{"model":"fake","states":[],"questions":` + q + `}`, []string{"states"}, "at least one"},
		{"too many", `{"model":"fake","states":[` + many + `],"questions":` + q + `}`, []string{"states"}, fmt.Sprintf("at most %d", systemone.MaxBatchStates)},
		{"a null state", `{"model":"fake","states":["a",null],"questions":` + q + `}`, []string{"states.1"}, "required"},
		{"a number", `{"model":"fake","states":["a","b",3],"questions":` + q + `}`, []string{"states.2"}, "string, an object or an array"},
		{"a state too long", `{"model":"fake","states":["a",` + big + `],"questions":` + q + `}`, []string{"states.1"}, "bytes"},
		{"a bad question", `{"model":"fake","states":["a"],"questions":{"u":{"type":"maybe"}}}`, []string{"questions.u.type"}, "not one of"},
		{"no model", `{"states":["a"],"questions":` + q + `}`, []string{"model"}, "Field required"},
		{"not JSON", `{"model":`, []string{"body"}, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, http.MethodPost, "/v1/systemone/batch", tc.body)
			if r.status != http.StatusUnprocessableEntity {
				t.Fatal(r)
			}
			var e struct {
				Detail []struct {
					Loc []any  `json:"loc"`
					Msg string `json:"msg"`
				} `json:"detail"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatal(err)
			}
			var locs []string
			msgs := ""
			for _, d := range e.Detail {
				parts := make([]string, 0, len(d.Loc))
				for _, p := range d.Loc[1:] {
					parts = append(parts, fmt.Sprint(p))
				}
				if len(parts) == 0 {
					parts = []string{fmt.Sprint(d.Loc[0])}
				}
				locs = append(locs, strings.Join(parts, "."))
				msgs += d.Msg + "; "
			}
			if fmt.Sprint(locs) != fmt.Sprint(tc.loc) || !strings.Contains(msgs, tc.msg) {
				t.Errorf("problems at %v (%s), want %v mentioning %q", locs, msgs, tc.loc, tc.msg)
			}
		})
	}
	if got := len(n.fake.Requests()); got != 0 {
		for _, r := range n.fake.Requests() {
			if r.Inference {
				t.Fatalf("an invalid batch reached the engine: %s %s", r.Method, r.Path)
			}
		}
	}
}

// A state that fails on its own is that state's error, with the status
// its request would have got, in its place; the other states are
// answered. A batch none of whose states was answered, and not for the
// caller's fault, is refused whole as the single request would be.
func TestBatchPartialFailure(t *testing.T) {
	// A state saying "poison" gets a reading that is not a
	// log-probability: malformed, no answer for it.
	poison := func(r fakeengine.Request) []float64 {
		lp := fakeengine.Halving(r.Labels)
		if p, _ := fakeengine.ParsePrompt(r.User); strings.Contains(p.State, "poison") {
			lp[0] = 0.5
		}
		return lp
	}
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: poison})
	s := serve(t, setup{nodes: []node{n}, requestTimeout: time.Minute})
	q := `{"u":{"type":"noul","instructions":"Yes?"}}`
	r := s.do(t, http.MethodPost, "/v1/systemone/batch", `{"model":"fake","states":["fine","poison","fine too"],"questions":`+q+`}`)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	var got batchReply
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	var bad struct {
		Status int `json:"status"`
		Error  struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(got.Results[1], &bad); err != nil || bad.Status != http.StatusServiceUnavailable || bad.Error.Type != systemone.Unavailable || !strings.Contains(bad.Error.Message, `"u"`) {
		t.Errorf("the poisoned state's result %s", got.Results[1])
	}
	for _, i := range []int{0, 2} {
		var ok struct {
			Answers map[string]struct {
				Noul float64 `json:"noul"`
			} `json:"answers"`
		}
		if err := json.Unmarshal(got.Results[i], &ok); err != nil || math.Abs(ok.Answers["u"].Noul-0.67) > 0.01 {
			t.Errorf("state %d: %s", i, got.Results[i])
		}
	}
	// Only poisoned states: nothing answered, refused whole as /v1/systemone
	// would refuse the first.
	whole := s.do(t, http.MethodPost, "/v1/systemone/batch", `{"model":"fake","states":["poison"],"questions":`+q+`}`)
	wantError(t, whole, http.StatusServiceUnavailable, systemone.Unavailable, `"u"`)
	// A model no node serves: refused whole, as /v1/systemone refuses it.
	unknown := s.do(t, http.MethodPost, "/v1/systemone/batch", `{"model":"nope","states":["a","b"],"questions":`+q+`}`)
	wantError(t, unknown, http.StatusBadRequest, systemone.APIUsageError, "nope")
}

// decideServer is a server with the decide gateway over one fake
// engine, rate limited as rate and burst say (0: unlimited).
func decideServer(t *testing.T, b fakeengine.Behavior, rate float64, burst int) *system1 {
	t.Helper()
	return decideServerOn(t, startNode(t, "n", fakeengine.LlamaCpp, b), rate, burst)
}

// decideServerOn is decideServer over the node n, whose fake a test
// reads.
func decideServerOn(t *testing.T, n node, rate float64, burst int) *system1 {
	t.Helper()
	return serve(t, setup{nodes: []node{n}, rate: rate, burst: burst,
		requestTimeout: time.Minute, decide: true})
}

// decideBatch is POST /v1/decide/batch's reply, read loosely.
type decideBatch struct {
	Results []struct {
		Status    string  `json:"status"`
		Decision  *string `json:"decision"`
		RequestID string  `json:"request_id"`
	} `json:"results"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// A decide batch decides each context as POST /v1/decide decides it
// alone, in order, each under a request id of its own; a batch that is
// not valid is refused whole, naming each problem, before anything is
// asked.
func TestDecideBatch(t *testing.T) {
	s := decideServer(t, fakeengine.Behavior{Prompted: fakeengine.Leaning}, 0, 0)
	contexts := []string{`{"t":"about billing"}`, `{"t":"about tech"}`, `{"t":"about tech and about tech"}`}
	const q = `"question":"Which team?","options":["billing","tech"]`
	r := s.do(t, http.MethodPost, "/v1/decide/batch", `{`+q+`,"contexts":[`+strings.Join(contexts, ",")+`]}`)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	var got decideBatch
	if err := json.Unmarshal(r.body, &got); err != nil || len(got.Results) != len(contexts) || got.Error != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	seen := map[string]bool{}
	for i, c := range contexts {
		alone := s.do(t, http.MethodPost, "/v1/decide", `{`+q+`,"context":`+c+`}`)
		var one struct {
			Status   string  `json:"status"`
			Decision *string `json:"decision"`
		}
		if err := json.Unmarshal(alone.body, &one); err != nil {
			t.Fatal(err)
		}
		res := got.Results[i]
		if res.Status != one.Status || fmt.Sprint(res.Decision) != fmt.Sprint(one.Decision) && (res.Decision == nil || one.Decision == nil || *res.Decision != *one.Decision) {
			t.Errorf("context %d: batch %+v, alone %s", i, res, alone.body)
		}
		if !requestID.MatchString(res.RequestID) || seen[res.RequestID] || res.RequestID == got.RequestID {
			t.Errorf("context %d: request id %q is not its own", i, res.RequestID)
		}
		seen[res.RequestID] = true
	}
	for _, tc := range []struct{ name, body, msg string }{
		{"no contexts", `{` + q + `}`, "contexts is required"},
		{"a context", `{` + q + `,"context":{"t":"x"}}`, "takes no context"},
		{"a request id", `{` + q + `,"request_id":"mine","contexts":[{}]}`, "takes no request_id"},
		{"an unknown field", `{` + q + `,"bogus":1,"contexts":[{}]}`, `unknown field(s) "bogus"; the fields are question, options, contexts, min_confidence, schema_version,`},
		{"too many", `{` + q + `,"contexts":[` + strings.TrimSuffix(strings.Repeat(`{},`, gateway.MaxBatchContexts+1), ",") + `]}`, fmt.Sprintf("at most %d", gateway.MaxBatchContexts)},
		{"a context not an object", `{` + q + `,"contexts":[{},"text"]}`, "contexts[1]: context must be a JSON object"},
		{"a bad question", `{"question":"","contexts":[{}]}`, "question"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, http.MethodPost, "/v1/decide/batch", tc.body)
			var got decideBatch
			if r.status != http.StatusUnprocessableEntity || json.Unmarshal(r.body, &got) != nil || got.Error == nil ||
				got.Error.Code != "invalid_request" || !strings.Contains(got.Error.Message, tc.msg) || len(got.Results) != 0 {
				t.Errorf("%s, want a 422 mentioning %q", r, tc.msg)
			}
		})
	}
}

// A decide batch sends each context to the model byte for byte as POST
// /v1/decide sends it: the engine gets the same prompts, HTML-like text,
// escapes and spacing included (a batch once re-encoded its contexts,
// turning "&" into "\u0026").
func TestDecideBatchSendsContextsAsTheSingleRoute(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.Leaning})
	s := decideServerOn(t, n, 0, 0)
	contexts := []string{
		`{"t":"Tom & Jerry <b>about billing</b>"}`,
		`{"t": "caf\u00e9 \u0026 line\u2028sep", "n": 1.50}`,
		"{\"t\":\"a\u2028b > c\"}",
	}
	const q = `"question":"Which team?","options":["billing","tech"]`
	prompts := func() []string {
		var out []string
		for _, r := range n.fake.Inferences() {
			out = append(out, r.User)
		}
		slices.Sort(out)
		n.fake.Reset()
		return out
	}
	if r := s.do(t, http.MethodPost, "/v1/decide/batch", `{`+q+`,"contexts":[`+strings.Join(contexts, ",")+`]}`); r.status != http.StatusOK {
		t.Fatal(r)
	}
	batch := prompts()
	for _, c := range contexts {
		if r := s.do(t, http.MethodPost, "/v1/decide", `{`+q+`,"context":`+c+`}`); r.status != http.StatusOK {
			t.Fatal(r)
		}
	}
	single := prompts()
	if len(single) == 0 || !slices.Equal(batch, single) {
		t.Fatalf("the batch sent other prompts than the single route:\nbatch  %q\nsingle %q", batch, single)
	}
}

// The decide batch's cap is the System One batch's.
func TestBatchCapsAgree(t *testing.T) {
	if gateway.MaxBatchContexts != systemone.MaxBatchStates {
		t.Fatalf("decide batches take %d contexts, System One batches %d states", gateway.MaxBatchContexts, systemone.MaxBatchStates)
	}
}

// A batch counts against the caller's rate as its states do: a batch of
// twenty, at one request a second and a burst of ten, passes (a batch
// larger than the burst is not refused for it), and the next request
// waits as long as the twenty would have made it.
func TestBatchCountsAgainstTheRate(t *testing.T) {
	for _, route := range []string{"/v1/systemone/batch", "/v1/decide/batch"} {
		t.Run(route, func(t *testing.T) {
			s := decideServer(t, fakeengine.Behavior{}, 1, 10)
			body := `{"model":"fake","questions":{"u":{"type":"noul"}},"states":[` + strings.TrimSuffix(strings.Repeat(`"s",`, 20), ",") + `]}`
			if route == "/v1/decide/batch" {
				body = `{"question":"Refund?","contexts":[` + strings.TrimSuffix(strings.Repeat(`{},`, 20), ",") + `]}`
			}
			if r := s.do(t, http.MethodPost, route, body); r.status != http.StatusOK {
				t.Fatal(r)
			}
			r := s.ask(t, `{"model":"fake","state":"s","questions":{"u":{"type":"noul"}}}`)
			wantError(t, r, http.StatusTooManyRequests, systemone.RateLimit)
			if secs, _ := strconv.Atoi(r.header.Get("Retry-After")); secs < 10 {
				t.Errorf("Retry-After %q after a batch of twenty at one a second", r.header.Get("Retry-After"))
			}
		})
	}
}

// A batch is counted against the caller's rate before its states are
// asked, on both routes: a request sent while a batch of twenty is still
// being answered, at one a second and a burst of ten, waits as long as
// the twenty make it, where a decide batch was counted only once it was
// answered, and batches sent side by side each took one token of the
// burst and were all answered whole.
func TestBatchCountedBeforeItIsAnswered(t *testing.T) {
	for _, route := range []string{"/v1/systemone/batch", "/v1/decide/batch"} {
		t.Run(route, func(t *testing.T) {
			n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Latency: 100 * time.Millisecond})
			s := decideServerOn(t, n, 1, 10)
			body := `{"model":"fake","questions":{"u":{"type":"noul"}},"states":[` + strings.TrimSuffix(strings.Repeat(`"s",`, 20), ",") + `]}`
			if route == "/v1/decide/batch" {
				body = `{"question":"Refund?","contexts":[` + strings.TrimSuffix(strings.Repeat(`{},`, 20), ",") + `]}`
			}
			done := make(chan reply, 1)
			go func() { done <- s.do(t, http.MethodPost, route, body) }()
			for len(n.fake.Inferences()) == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			r := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Refund?"}`)
			if r.status != http.StatusTooManyRequests {
				t.Errorf("a request while the batch of twenty is answered: %s, want a 429", r)
			}
			if b := <-done; b.status != http.StatusOK {
				t.Fatal(b)
			}
		})
	}
}

// A decide batch no context of which was answered, for reasons that are
// not the caller's, is refused as its first context's request would be
// (a 5xx a client retries), as a System One batch is, even where the
// contexts failed in different ways (one timed out, one was answered
// malformed), where it was a 200 that read as answered.
func TestDecideBatchNoneAnsweredIsRefused(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: func(r fakeengine.Request) []float64 {
		switch {
		case strings.Contains(r.User, "slow"):
			time.Sleep(2500 * time.Millisecond) // past the link's timeout, however loaded the machine
		case strings.Contains(r.User, "garbled"):
			return []float64{0.5, 0.5} // not log-probabilities
		}
		return []float64{-0.1, -2.5}
	}})
	s := serve(t, setup{nodes: []node{n}, requestTimeout: time.Minute, decide: true,
		decideConfig: "gateway:\n  deadline: 60s\n  chain:\n    - {name: local, model: fake, timeout: 1s}\n"})
	r := s.do(t, http.MethodPost, "/v1/decide/batch", `{"question":"Refund?","contexts":[{"t":"slow"},{"t":"garbled"}]}`)
	var got struct {
		Results []struct {
			Error *struct{ Code string } `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || len(got.Results) != 2 || got.Results[0].Error == nil || got.Results[1].Error == nil ||
		got.Results[0].Error.Code == got.Results[1].Error.Code {
		t.Fatalf("%s: want two contexts failed in two ways (%v)", r, err)
	}
	if want := map[string]int{"provider_timeout": 504, "provider_error": 502, "malformed_response": 502}[got.Results[0].Error.Code]; r.status != want {
		t.Errorf("status %d, want %d, the first context's (%s)", r.status, want, got.Results[0].Error.Code)
	}
}

// The batch refuses up front, for the whole batch and before any engine
// is asked, what /v1/systemone refuses of a request: Jev 1.14's images
// (a body's assets, a box question, a multipart body), an unknown
// top-level field, a model no node serves (each a 400
// api_usage_error) and a header holding nonsense (a 422 naming it).
func TestBatchRefusesAsTheSingleRouteDoes(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	q := `{"u":{"type":"noul","instructions":"Yes?"}}`
	batch := `{"model":"fake","states":["a","b"],"questions":` + q + `}`
	for _, tc := range []struct {
		name, body string
		headers    []string
		status     int
		has        string
	}{
		{"images", strings.Replace(batch, `"questions"`, `"assets":{"p":{"type":"image","format":"png","data_base64":"iVBORw0KGgo="}},"questions"`, 1), nil, http.StatusBadRequest, "assets"},
		{"a box question", strings.Replace(batch, q, `{"b":{"type":"box","instructions":"Where?"}}`, 1), nil, http.StatusBadRequest, "box question"},
		{"multipart", batch, []string{"Content-Type: multipart/form-data; boundary=x"}, http.StatusBadRequest, "multipart"},
		{"an unknown field", strings.Replace(batch, `"questions"`, `"temperature":0,"questions"`, 1), nil, http.StatusBadRequest, "temperature"},
		{"an unknown model", strings.Replace(batch, `"fake"`, `"nobody"`, 1), nil, http.StatusBadRequest, "nobody"},
		{"a bad gate", batch, []string{"X-System1-Min-Label-Mass: lots"}, http.StatusUnprocessableEntity, httpapi.MinLabelMassHeader},
		{"a bad coverage", batch, []string{"X-System1-Coverage: 2"}, http.StatusUnprocessableEntity, "X-System1-Coverage"},
		{"a bad debias", batch, []string{"X-System1-Debias: sometimes"}, http.StatusUnprocessableEntity, httpapi.DebiasHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, http.MethodPost, "/v1/systemone/batch", tc.body, tc.headers...)
			if r.status != tc.status || !strings.Contains(string(r.body), tc.has) {
				t.Errorf("got %s, want %d naming %s", r, tc.status, tc.has)
			}
			// The single route refuses its request alike.
			single := strings.Replace(tc.body, `"states":["a","b"]`, `"state":"a"`, 1)
			if alone := s.do(t, http.MethodPost, "/v1/systemone", single, tc.headers...); alone.status != r.status {
				t.Errorf("the batch's %d, the single request's %s", r.status, alone)
			}
		})
	}
	if got := len(n.fake.Inferences()); got != 0 {
		t.Errorf("%d engine calls for batches refused up front", got)
	}
}

// A single request's state (or its old name, document) sent beside a
// batch's states is a field the batch does not define: a 400 naming it,
// as any other unknown field, never dropped in silence.
func TestBatchRefusesAStateBesideStates(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	for _, field := range []string{"state", "document"} {
		r := s.do(t, http.MethodPost, "/v1/systemone/batch",
			`{"model":"fake","`+field+`":"c","states":["a","b"],"questions":{"u":{"type":"noul"}}}`)
		wantError(t, r, http.StatusBadRequest, systemone.APIUsageError, `"`+field+`"`)
	}
	if got := len(n.fake.Inferences()); got != 0 {
		t.Errorf("%d engine calls for batches refused up front", got)
	}
}

// Under the gate's headers a state whose answer system1 will not stand
// behind is that state's own 422 in its place, the body /v1/systemone
// gives that state alone, while the other states are answered; a batch
// every state of which is refused is still a 200 (the refusals are the
// caller's to read, not a reason to ask again), and without the gate
// every state is answered.
func TestBatchGateRefusesAState(t *testing.T) {
	// A "vague" state gets 0.5 of the mass on the noul's two labels, any
	// other 0.95.
	vague := func(r fakeengine.Request) []float64 {
		if p, _ := fakeengine.ParsePrompt(r.User); strings.Contains(p.State, "vague") {
			return fakeengine.Probs(0.3, 0.2)(r.Labels)
		}
		return fakeengine.Probs(0.6, 0.35)(r.Labels)
	}
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: vague})
	s := serve(t, setup{nodes: []node{n}, requestTimeout: time.Minute})
	q := `{"u":{"type":"noul","instructions":"Yes?"}}`
	gate := "X-System1-Min-Label-Mass: 0.9"
	states := []string{`"clear"`, `"vague"`, `"clear too"`}
	batch := func(states []string, headers ...string) batchReply {
		t.Helper()
		r := s.do(t, http.MethodPost, "/v1/systemone/batch", `{"model":"fake","states":[`+strings.Join(states, ",")+`],"questions":`+q+`}`, headers...)
		if r.status != http.StatusOK {
			t.Fatal(r)
		}
		var got batchReply
		if err := json.Unmarshal(r.body, &got); err != nil || len(got.Results) != len(states) {
			t.Fatalf("%s: %v", r, err)
		}
		return got
	}
	got := batch(states, gate)
	for i, st := range states {
		alone := s.ask(t, `{"model":"fake","state":`+st+`,"questions":`+q+`}`, gate)
		want := withoutLatency(t, alone.body)
		if alone.status != http.StatusOK {
			want["status"] = json.RawMessage(fmt.Sprint(alone.status))
		}
		if a := withoutLatency(t, got.Results[i]); fmt.Sprint(a) != fmt.Sprint(want) {
			t.Errorf("state %s: batch %s\nalone %d %s", st, got.Results[i], alone.status, alone.body)
		}
	}
	var refused struct {
		Status int `json:"status"`
		Detail []struct {
			Loc  []any  `json:"loc"`
			Type string `json:"type"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(got.Results[1], &refused); err != nil || refused.Status != http.StatusUnprocessableEntity ||
		len(refused.Detail) != 1 || refused.Detail[0].Type != "refused" || fmt.Sprint(refused.Detail[0].Loc) != "[body questions u]" {
		t.Errorf("the vague state under the gate: %s", got.Results[1])
	}
	for _, i := range []int{0, 2} {
		if strings.Contains(string(got.Results[i]), `"status"`) {
			t.Errorf("a clear state under the gate: %s", got.Results[i])
		}
	}
	for i, res := range batch([]string{`"vague"`, `"vague again"`}, gate).Results {
		if !strings.Contains(string(res), `"status":422`) {
			t.Errorf("only vague states, state %d: %s", i, res)
		}
	}
	for i, res := range batch(states).Results {
		if strings.Contains(string(res), `"status"`) {
			t.Errorf("no gate, state %d refused: %s", i, res)
		}
	}
}

// A batch takes longer than one request, so both batch routes move the
// write deadline past the http.Server's WriteTimeout, which system1 serve
// sets at a single request's timeout: a batch answered after it still
// reaches its client.
func TestBatchOutlastsTheWriteTimeout(t *testing.T) {
	n := startNode(t, "a", fakeengine.OpenAI, fakeengine.Behavior{Latency: 600 * time.Millisecond})
	s := serve(t, setup{nodes: []node{n}, decide: true, requestTimeout: time.Minute, writeTimeout: 200 * time.Millisecond})
	for _, tc := range []struct{ path, body string }{
		{"/v1/systemone/batch", `{"model":"fake","states":["a","b"],"questions":{"u":{"type":"noul"}}}`},
		{"/v1/decide/batch", `{"question":"Urgent?","contexts":[{"a":1},{"b":2}]}`},
	} {
		resp, err := http.Post(s.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", tc.path, resp.StatusCode)
		}
	}
}

// Each state's latency_ms is its own, from when it was asked to its
// answer, as /v1/systemone times a request alone: asked one at a time
// (a node of one slot), the states' latencies sum to no more than the
// whole batch took, where each state's reading the batch's time would
// sum to twice it.
func TestBatchLatencyIsEachStatesOwn(t *testing.T) {
	n := startNode(t, "a", fakeengine.OpenAI, fakeengine.Behavior{Latency: 50 * time.Millisecond}, func(c *config.Node) { c.MaxInFlight = 1 })
	s := serve(t, setup{nodes: []node{n}, requestTimeout: time.Minute})
	start := time.Now()
	r := s.do(t, http.MethodPost, "/v1/systemone/batch", `{"model":"fake","states":["a","b"],"questions":{"u":{"type":"noul"}}}`)
	took := time.Since(start)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	var got batchReply
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for i, res := range got.Results {
		var l struct {
			Latency *int64 `json:"latency_ms"`
		}
		if err := json.Unmarshal(res, &l); err != nil || l.Latency == nil || *l.Latency <= 0 {
			t.Fatalf("state %d: latency_ms not a positive number (%v): %s", i, err, res)
		}
		sum += *l.Latency
	}
	if sum > took.Milliseconds() {
		t.Errorf("the states' latencies sum to %d ms, the batch took %d ms", sum, took.Milliseconds())
	}
}
