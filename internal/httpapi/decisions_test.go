package httpapi_test

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/httpapi"
	"system1/internal/web"
)

// ticketDecisions is the ticket (systemone_test.go) on OpenAI's
// Decisions wire: the same state, questions, options and order, under the
// model the fake engines serve.
const ticketDecisions = `{"model":"fake","input":"Ticket: I was charged twice.","questions":[
	{"type":"choice","name":"dept","instructions":"Which department?","choices":[{"value":"billing"},{"value":"technical","description":"bugs and outages"},{"value":"sales"}]},
	{"type":"predicate","name":"urgent","instructions":"Is it urgent?"},
	{"type":"score","name":"mood","instructions":"How upset is the customer?","levels":[{"label":"calm"},{"label":"annoyed"},{"label":"angry"}]}]}`

// ticketJev is the ticket on the System One wire, under the same model.
var ticketJev = `{"model":"fake","state":"Ticket: I was charged twice.","questions":{
	"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":"bugs and outages","sales":null}},
	"urgent":{"type":"noul","instructions":"Is it urgent?"},
	"mood":{"type":"score","instructions":"How upset is the customer?","criteria":["calm","annoyed","angry"]}}}`

// byPrompt gives each label a log-probability drawn from a hash of the
// prompt and the label, so that two requests are answered alike only
// when the engine was asked alike.
func byPrompt(r fakeengine.Request) []float64 {
	lp := make([]float64, len(r.Labels))
	for i, l := range r.Labels {
		h := fnv.New64a()
		h.Write([]byte(r.System + "\x00" + r.User + "\x00" + l))
		lp[i] = -1 - float64(h.Sum64()%1000)/250
	}
	return lp
}

// reading is an answer on either wire as numbers: a choice's or a
// score's probabilities in option order, its confidence and score; a
// noul's or predicate's P(true) as probabilities[0].
type reading struct {
	Probabilities   []float64
	Confidence      float64
	Score           float64
	Refused         bool
	Name            *string
	Type            string
	ChoiceValueType string
}

// decisionsReadings reads a /v1/decisions 200 in question order.
func decisionsReadings(t testing.TB, r reply) []reading {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("got %s, want 200", r)
	}
	var body struct {
		Model   string
		Answers []struct {
			Type          string
			Name          *string
			Probability   *float64
			Choice        json.RawMessage
			Confidence    float64
			Score         float64
			Probabilities []struct {
				Value       json.RawMessage
				Probability float64
			}
		}
		Usage map[string]json.RawMessage
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	var out []reading
	for _, a := range body.Answers {
		rd := reading{Type: a.Type, Name: a.Name, Confidence: a.Confidence, Score: a.Score, Refused: a.Type == "refusal"}
		if a.Probability != nil {
			rd.Probabilities = []float64{*a.Probability}
		}
		for _, p := range a.Probabilities {
			rd.Probabilities = append(rd.Probabilities, p.Probability)
		}
		if len(a.Choice) > 0 {
			var v any
			_ = json.Unmarshal(a.Choice, &v)
			rd.ChoiceValueType = map[bool]string{true: "boolean", false: "string"}[a.Choice[0] == 't' || a.Choice[0] == 'f']
		}
		out = append(out, rd)
	}
	return out
}

// jevReadings reads the ticket's /v1/systemone 200 in question order.
func jevReadings(t testing.TB, r reply) []reading {
	t.Helper()
	a := decode(t, r)
	d, u, m := a.Answers.Dept, a.Answers.Urgent, a.Answers.Mood
	return []reading{
		{Probabilities: []float64{d.Probabilities["billing"], d.Probabilities["technical"], d.Probabilities["sales"]}, Confidence: d.Confidence},
		{Probabilities: []float64{u.Noul}},
		{Probabilities: []float64{m.Probabilities["0"], m.Probabilities["1"], m.Probabilities["2"]}, Confidence: m.Confidence, Score: m.Score},
	}
}

// The same request on both wires asks the engine the same prompts and is
// answered with the same numbers: probabilities, confidences and scores
// from one unrounded distribution, by the same formulas, at the same two
// decimals.
func TestDecisionsAnswerAsSystemOne(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: byPrompt})
	s := serve(t, setup{nodes: []node{n}})
	jev := jevReadings(t, s.ask(t, ticketJev))
	asked := len(n.fake.Inferences())
	r := s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions)
	dec := decisionsReadings(t, r)
	for i := range jev {
		j, d := jev[i], dec[i]
		d.Type, d.Name, d.ChoiceValueType = "", nil, ""
		if !slices.Equal(j.Probabilities, d.Probabilities) || j.Confidence != d.Confidence || j.Score != d.Score {
			t.Errorf("question %d: System One %+v, Decisions %+v", i, j, d)
		}
	}
	prompts := func(reqs []fakeengine.Request) []string {
		var out []string
		for _, q := range reqs {
			if q.Inference {
				out = append(out, q.System+"\x00"+q.User+"\x00"+strings.Join(q.Labels, ","))
			}
		}
		slices.Sort(out)
		return out
	}
	all := n.fake.Inferences()
	if a, b := prompts(all[:asked]), prompts(all[asked:]); len(a) == 0 || !slices.Equal(a, b) {
		t.Errorf("the engine was asked\n%q\non the System One wire and\n%q\non the Decisions wire", a, b)
	}
	var usage struct {
		Usage struct {
			InputTokens        int `json:"input_tokens"`
			OutputTokens       int `json:"output_tokens"`
			TotalTokens        int `json:"total_tokens"`
			InputTokensDetails *struct {
				CachedTokens     *int `json:"cached_tokens"`
				CacheWriteTokens *int `json:"cache_write_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails *struct {
				ReasoningTokens *int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		}
		Model string
	}
	if err := json.Unmarshal(r.body, &usage); err != nil {
		t.Fatal(err)
	}
	u := usage.Usage
	if u.InputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens || u.InputTokensDetails == nil || u.InputTokensDetails.CachedTokens == nil ||
		u.InputTokensDetails.CacheWriteTokens == nil || u.OutputTokensDetails == nil || u.OutputTokensDetails.ReasoningTokens == nil || usage.Model != fakeengine.DefaultModel {
		t.Errorf("usage or model: %s", r.body)
	}
}

// Unnamed questions are answered with name null, in order; a boolean
// choice value comes back a boolean beside the string of its text.
func TestDecisionsNamesAndTypedValues(t *testing.T) {
	s := serve(t, setup{nodes: []node{startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})}})
	r := s.do(t, http.MethodPost, "/v1/decisions", `{"model":"fake","input":[{"role":"user","content":[{"type":"input_json","data":{"ticket":"charged twice"}}]}],"questions":[
		{"type":"predicate","instructions":"Is it a refund?"},
		{"type":"choice","name":"right","instructions":"Is the customer right?","choices":[{"value":true},{"value":"true","description":"the word"},{"value":false}]},
		{"type":"predicate","instructions":"Polite?"}]}`)
	got := decisionsReadings(t, r)
	if len(got) != 3 || got[0].Name != nil || got[2].Name != nil || got[1].Name == nil || *got[1].Name != "right" {
		t.Fatalf("names: %s", r.body)
	}
	// The fake engine gives the first label the most: the choice is the
	// boolean true, typed as asked.
	if !strings.Contains(string(r.body), `"choice":true,`) || !strings.Contains(string(r.body), `{"value":"true","probability"`) ||
		!strings.Contains(string(r.body), `{"value":false,"probability"`) {
		t.Errorf("typed values: %s", r.body)
	}
}

// Every error is OpenAI's envelope with the status the SDKs map to their
// classes, and none reaches the engine: the request's own problems are
// 400s naming param, an unknown model a 404 naming model, a wrong key a
// 401, a caller over its rate a 429 with retry-after-ms, a body over the
// limit a 413, a header holding nonsense a 400 naming it, a wrong method
// a 405.
func TestDecisionsErrors(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, keys: []string{"k"}, rate: 1000, burst: 1000, maxBody: 4096})
	const auth = "Authorization: Bearer k"
	pred := `"questions":[{"type":"predicate","instructions":"?"}]`
	for _, tc := range []struct {
		name, body  string
		headers     []string
		status      int
		typ, param  string
		code, inMsg string
	}{
		{"unknown top-level field", `{"model":"fake","input":"s",` + pred + `,"temperature":0}`, nil, 400, "invalid_request_error", "temperature", "", "unknown field"},
		{"a choice twice", `{"model":"fake","input":"s","questions":[{"type":"choice","instructions":"?","choices":[{"value":"a"},{"value":"a"}]}]}`, nil,
			400, "invalid_request_error", "questions[0].choices[1].value", "", ""},
		{"no questions", `{"model":"fake","input":"s","questions":[]}`, nil, 400, "invalid_request_error", "questions", "", ""},
		{"an image", `{"model":"fake","input":[{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}],` + pred + `}`,
			nil, 400, "invalid_request_error", "input[0].content[1]", "unsupported_input", ""},
		{"a box question (Jev 1.14's, which needs an image)", `{"model":"fake","input":"photo-1","questions":[{"type":"predicate","instructions":"?"},{"type":"box","name":"where","instructions":"the red square"}]}`,
			[]string{"TypeSafe-Danger-Zone-Images: true"}, 400, "invalid_request_error", "questions[1].type", "unsupported_input", "box"},
		{"unknown model", `{"model":"gpt-6-luna",` + `"input":"s",` + pred + `}`, nil, 404, "invalid_request_error", "model", "model_not_found", "gpt-6-luna"},
		{"unknown model before the limits", `{"model":"gpt-6-luna","input":"s","questions":[{"type":"score","instructions":"?","levels":[{"label":"one"}]}]}`, nil,
			404, "invalid_request_error", "model", "model_not_found", ""},
		{"a wrong gate", `{"model":"fake","input":"s",` + pred + `}`, []string{"X-System1-Min-Label-Mass: 2"}, 400, "invalid_request_error", "X-System1-Min-Label-Mass", "", "[0,1]"},
		{"a wrong none option", `{"model":"fake","input":"s",` + pred + `}`, []string{"X-System1-None-Option: maybe"}, 400, "invalid_request_error", "X-System1-None-Option", "", ""},
		{"a wrong debias", `{"model":"fake","input":"s",` + pred + `}`, []string{"X-System1-Debias: twice"}, 400, "invalid_request_error", "X-System1-Debias", "", ""},
		{"too large", `{"model":"fake","input":"` + strings.Repeat("x", 5000) + `",` + pred + `}`, nil, 413, "invalid_request_error", "", "", "4096 bytes"},
		{"not JSON", `{"model":`, nil, 400, "invalid_request_error", "", "", "not valid JSON"},
	} {
		r := s.do(t, http.MethodPost, "/v1/decisions", tc.body, append([]string{auth}, tc.headers...)...)
		e := openAIError(t, r)
		if r.status != tc.status || e.Type != tc.typ || str(e.Param) != tc.param || str(e.Code) != tc.code || !strings.Contains(e.Message, tc.inMsg) {
			t.Errorf("%s: %s", tc.name, r)
		}
	}
	r := s.do(t, http.MethodPost, "/v1/decisions", `{"model":"fake","input":"s",`+pred+`}`, "Authorization: Bearer wrong")
	if e := openAIError(t, r); r.status != 401 || str(e.Code) != "invalid_api_key" {
		t.Errorf("a wrong key: %s", r)
	}
	// The client's checks hold x-request-id to every reply, this one too.
	r = s.do(t, http.MethodGet, "/v1/decisions", "")
	if e := openAIError(t, r); r.status != 405 || e.Type != "invalid_request_error" || r.header.Get("Allow") != "POST" {
		t.Errorf("a wrong method: %s %v", r, r.header)
	}
	if len(n.fake.Inferences()) != 0 {
		t.Errorf("%d engine calls for requests that are all refused", len(n.fake.Inferences()))
	}

	limited := serve(t, setup{nodes: []node{n}, rate: 0.001, burst: 1})
	limited.do(t, http.MethodPost, "/v1/decisions", `{"model":"fake","input":"s",`+pred+`}`)
	r = limited.do(t, http.MethodPost, "/v1/decisions", `{"model":"fake","input":"s",`+pred+`}`)
	if e := openAIError(t, r); r.status != 429 || str(e.Code) != "rate_limit_exceeded" || r.header.Get("Retry-After-Ms") == "" || r.header.Get("Retry-After") == "" {
		t.Errorf("over the rate: %s %v", r, r.header)
	}

	// Too many wrong keys from one address: the 429 asks for its pause in
	// both headers the SDKs read, as the rate limit's does.
	guesser := serve(t, setup{nodes: []node{n}, keys: []string{"k"}})
	for i := range 30 {
		r = guesser.do(t, http.MethodPost, "/v1/decisions", `{"model":"fake","input":"s",`+pred+`}`, "Authorization: Bearer guess-"+strconv.Itoa(i))
		if r.status == http.StatusTooManyRequests {
			break
		}
	}
	ms, err := strconv.Atoi(r.header.Get("Retry-After-Ms"))
	if e := openAIError(t, r); r.status != 429 || str(e.Code) != "rate_limit_exceeded" || err != nil || ms <= 0 || r.header.Get("Retry-After") == "" {
		t.Errorf("too many wrong keys: %s %v", r, r.header)
	}
}

type openAIEnvelope struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func openAIError(t testing.TB, r reply) openAIEnvelope {
	t.Helper()
	var env struct {
		Error openAIEnvelope `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	return env.Error
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// An engine that cannot serve decisions (its 501) is the request's, a
// 400 naming the model on the Decisions wire and a 422 on the System One
// wire, never a 5xx that the SDKs retry; a node that is down is a 503.
func TestDecisionsEngineFailures(t *testing.T) {
	n501 := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Fault: fakeengine.Status, Status: http.StatusNotImplemented})
	s := serve(t, setup{nodes: []node{n501}})
	r := s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions)
	if e := openAIError(t, r); r.status != 400 || str(e.Param) != "model" || e.Type != "invalid_request_error" {
		t.Errorf("a 501 on the Decisions wire: %s", r)
	}
	if r := s.ask(t, ticketJev); r.status != http.StatusUnprocessableEntity {
		t.Errorf("a 501 on the System One wire: %s", r)
	}
	down := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Fault: fakeengine.Refuse})
	s = serve(t, setup{nodes: []node{down}})
	r = s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions)
	if e := openAIError(t, r); r.status != 503 || e.Type != "server_error" {
		t.Errorf("a node down: %s", r)
	}
}

// An engine's refusal of a prompt longer than its context is OpenAI's
// 400 context_length_exceeded naming input on the Decisions wire, in the
// engine's words (llama.cpp's, vLLM's, Ollama's), and stays the System
// One wire's 422; another refusal of the request is not one.
func TestDecisionsContextLengthExceeded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect fakeengine.Dialect
		msg     string
		code    string
	}{
		{"llama.cpp", fakeengine.LlamaCpp, "request (948 tokens) exceeds the available context size (256 tokens), try increasing it", "context_length_exceeded"},
		{"vLLM", fakeengine.OpenAI, "This model's maximum context length is 2048 tokens. However, your request has 4000 input tokens.", "context_length_exceeded"},
		{"Ollama", fakeengine.Ollama, "the input length exceeds the context length", "context_length_exceeded"},
		{"another refusal", fakeengine.LlamaCpp, "invalid grammar", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "n", tc.dialect, fakeengine.Behavior{Fault: fakeengine.Status, Status: http.StatusBadRequest, Message: tc.msg})
			s := serve(t, setup{nodes: []node{n}})
			r := s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions)
			e := openAIError(t, r)
			wantParam := "input"
			if tc.code == "" {
				wantParam = "questions[0]"
			}
			if r.status != 400 || str(e.Code) != tc.code || str(e.Param) != wantParam || e.Type != "invalid_request_error" || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got %s, want 400 %q naming %s", r, tc.code, wantParam)
			}
			if r := s.ask(t, ticketJev); r.status != http.StatusUnprocessableEntity {
				t.Errorf("the System One wire: %s, want 422", r)
			}
		})
	}
	// Behind a decisions node (hosted OpenAI, vLLM, another system1), the
	// upstream's own context_length_exceeded is passed on as one.
	d := fakeengine.StartDecisions(t, fakeengine.Reply{Model: fakeengine.DefaultModel, Status: http.StatusBadRequest,
		Message: "This model's maximum context length is 8192 tokens."})
	s := serve(t, setup{nodes: []node{{cfg: config.Node{Name: "d", URL: d.URL, Dialect: "decisions", Models: []string{fakeengine.DefaultModel}}}}})
	r := s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions)
	if e := openAIError(t, r); r.status != 400 || str(e.Code) != "context_length_exceeded" || str(e.Param) != "input" {
		t.Errorf("behind a decisions node: %s", r)
	}
}

// The gate's headers refuse what system1 will not stand behind, on both
// wires by one rule: on the Decisions wire a refused question is a
// refusal answer beside the others, with why in X-System1-Refused; on
// the System One wire, which has no refusal, the request is a 422 naming
// each refused question, never a 200.
func TestDecisionsRefusals(t *testing.T) {
	// The fake engine puts 0.6, 0.3 and 0.05 on the first labels: the
	// noul's two labels hold 0.9 of the mass, the choice's and the
	// score's three 0.95.
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.6, 0.3, 0.05)})
	s := serve(t, setup{nodes: []node{n}})
	r := s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions, "X-System1-Min-Label-Mass: 0.92")
	got := decisionsReadings(t, r)
	if got[0].Refused || !got[1].Refused || got[2].Refused || str(got[1].Name) != "urgent" || len(got[0].Probabilities) != 3 {
		t.Fatalf("refusals under a gate of 0.92: %s", r)
	}
	if h := r.header.Get("X-System1-Refused"); h != "urgent: label mass 0.9 < 0.92" {
		t.Errorf("X-System1-Refused %q", h)
	}
	got = decisionsReadings(t, s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions, "X-System1-Min-Label-Mass: 0.99"))
	if !got[0].Refused || !got[1].Refused || !got[2].Refused {
		t.Errorf("a gate over every question's mass: %+v", got)
	}
	if got := decisionsReadings(t, s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions, "X-System1-Min-Label-Mass: 0.5")); got[0].Refused || got[1].Refused || got[2].Refused {
		t.Errorf("a gate under the mass refused: %+v", got)
	}
	r = s.ask(t, ticketJev, "X-System1-Min-Label-Mass: 0.92")
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"loc":["body","questions","urgent"]`) ||
		strings.Contains(string(r.body), `"dept"`) || strings.Contains(string(r.body), `"mood"`) || !strings.Contains(string(r.body), `"type":"refused"`) {
		t.Errorf("the System One wire under the gate: %s", r)
	}

	// The none option: where it wins, a refusal; where it loses, the
	// caller's options alone, renormalised.
	last := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Logprobs: func(labels []string) []float64 {
		lp := make([]float64, len(labels))
		for i := range lp {
			lp[i] = -float64(len(labels)-i) * math.Ln2 // the last label likeliest
		}
		return lp
	}})
	for _, tc := range []struct {
		node    node
		refused bool
	}{{startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{}), false}, {last, true}} {
		s := serve(t, setup{nodes: []node{tc.node}})
		r := s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions, "X-System1-None-Option: true")
		got := decisionsReadings(t, r)
		if got[0].Refused != tc.refused || got[1].Refused || got[2].Refused {
			t.Errorf("none option (refused %v): %s", tc.refused, r)
		}
		if !tc.refused {
			// Halving over four labels is 8/15, 4/15, 2/15 and 1/15 for
			// none: over the three options, 4/7, 2/7 and 1/7.
			if !slices.Equal(got[0].Probabilities, []float64{0.57, 0.29, 0.14}) {
				t.Errorf("the options renormalised without none: %v", got[0].Probabilities)
			}
		}
		jr := s.ask(t, ticketJev, "X-System1-None-Option: true")
		if (jr.status == http.StatusUnprocessableEntity) != tc.refused {
			t.Errorf("none option on the System One wire (refused %v): %s", tc.refused, jr)
		}
	}
}

// A decisions node (OpenAI, vLLM, Fireworks or another system1) stands
// behind both wires: a Jev request is translated to it and its answers
// back; a question it refuses stays a refusal (a refusal answer on the
// Decisions wire, a 422 naming it on the System One wire, never asked
// elsewhere); a node that fails, or no longer lists the model (404), is
// failed over to the next.
func TestDecisionsNode(t *testing.T) {
	decisionsNode := func(name string, r fakeengine.Reply, edit ...func(*config.Node)) (*fakeengine.Decisions, node) {
		r.Model = fakeengine.DefaultModel
		d := fakeengine.StartDecisions(t, r)
		c := config.Node{Name: name, URL: d.URL, Dialect: "decisions", Models: []string{fakeengine.DefaultModel}}
		for _, e := range edit {
			e(&c)
		}
		return d, node{cfg: c}
	}
	first, a := decisionsNode("a", fakeengine.Reply{Probs: []float64{0.2, 0.7, 0.1}})
	s := serve(t, setup{nodes: []node{a}})
	jev := jevReadings(t, s.ask(t, ticketJev))
	// Read as the endpoint gave them: the choice's and the score's
	// three, the noul's P(true) the first.
	if !slices.Equal(jev[0].Probabilities, []float64{0.2, 0.7, 0.1}) || jev[1].Probabilities[0] != 0.2 || !slices.Equal(jev[2].Probabilities, []float64{0.2, 0.7, 0.1}) {
		t.Errorf("a Jev request through a decisions node: %+v", jev)
	}
	var sent struct {
		Questions []struct {
			Type, Name string
			Choices    []struct{ Value string }
			Levels     []struct{ Label string }
		}
	}
	if err := json.Unmarshal([]byte(first.LastRequest()), &sent); err != nil || len(sent.Questions) != 3 || sent.Questions[0].Type != "choice" ||
		sent.Questions[1].Type != "predicate" || sent.Questions[2].Type != "score" || len(sent.Questions[0].Choices) != 3 || sent.Questions[2].Levels[2].Label != "angry" {
		t.Errorf("the request the node got: %s", first.LastRequest())
	}
	dec := decisionsReadings(t, s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions))
	for i := range jev {
		if !slices.Equal(jev[i].Probabilities, dec[i].Probabilities) || jev[i].Confidence != dec[i].Confidence {
			t.Errorf("question %d: %+v on the System One wire, %+v on the Decisions wire", i, jev[i], dec[i])
		}
	}

	// A refusal stays a refusal, whichever wire, and is not asked of the
	// second node.
	first.Set(fakeengine.Reply{Model: fakeengine.DefaultModel, Refuse: []string{"urgent"}})
	second, b := decisionsNode("b", fakeengine.Reply{}, fallback)
	s = serve(t, setup{nodes: []node{a, b}})
	r := s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions)
	dec = decisionsReadings(t, r)
	if dec[0].Refused || !dec[1].Refused || dec[2].Refused || r.header.Get("X-System1-Refused") != "urgent: the node declined: the Decisions endpoint refused to answer it" {
		t.Errorf("a refusal through the node: %s %v", r, r.header)
	}
	jr := s.ask(t, ticketJev)
	if jr.status != http.StatusUnprocessableEntity || !strings.Contains(string(jr.body), `"loc":["body","questions","urgent"]`) {
		t.Errorf("a refusal on the System One wire: %s", jr)
	}
	if second.Calls.Load() != 0 {
		t.Errorf("the refused question went on to the second node (%d calls)", second.Calls.Load())
	}

	// Failover: the first node fails (503, then a 404 for a model it no
	// longer lists); the second answers.
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusNotFound} {
		first, a := decisionsNode("a", fakeengine.Reply{Status: status})
		second, b := decisionsNode("b", fakeengine.Reply{}, fallback)
		s := serve(t, setup{nodes: []node{a, b}})
		decisionsReadings(t, s.do(t, http.MethodPost, "/v1/decisions", ticketDecisions))
		jevReadings(t, s.ask(t, ticketJev))
		if first.Calls.Load() == 0 || second.Calls.Load() != 2 {
			t.Errorf("status %d: the first node got %d calls, the second %d", status, first.Calls.Load(), second.Calls.Load())
		}
	}
}

// The OpenAPI document lists the headers both answering wires read, by
// the names this face reads them under.
func TestGateHeadersAreTheDocuments(t *testing.T) {
	if want := []string{httpapi.DebiasHeader, httpapi.PriorHeader, httpapi.MinLabelMassHeader, httpapi.NoneOptionHeader}; !slices.Equal(web.GateHeaders, want) {
		t.Fatalf("the document lists %v; the face reads %v", web.GateHeaders, want)
	}
}

// A choice at its node's option cap has no room for the none option:
// the caller, who sent that many, is told the header is what takes it
// over, on either wire, before any node is asked.
func TestNoneOptionOverTheOptionCap(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	n.cfg.MaxOptions = 3
	s := serve(t, setup{nodes: []node{n}})
	for _, tc := range []struct {
		route, body string
		status      int
	}{
		{"/v1/systemone", ticketJev, http.StatusUnprocessableEntity},
		{"/v1/decisions", ticketDecisions, http.StatusBadRequest},
	} {
		r := s.do(t, http.MethodPost, tc.route, tc.body, "X-System1-None-Option: true")
		body := string(r.body)
		if r.status != tc.status || !strings.Contains(body, "X-System1-None-Option") || !strings.Contains(body, `\"dept\" has 3 options`) || strings.Contains(body, "4 options exceed") {
			t.Errorf("%s: %s", tc.route, r)
		}
	}
}

// The OpenAPI document lists, as a parameter of each answering route,
// every request header the route reads: the System One routes read
// X-System1-Coverage beside the gate's, which a client generated from
// the document could not send where it was left out.
func TestRequestHeadersAreTheDocuments(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In string }
		}
	}
	if err := json.Unmarshal(web.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	gate := []string{httpapi.DebiasHeader, httpapi.PriorHeader, httpapi.MinLabelMassHeader, httpapi.NoneOptionHeader}
	for path, want := range map[string][]string{
		"/v1/systemone":       append(slices.Clone(gate), httpapi.CoverageHeader),
		"/v1/systemone/batch": append(slices.Clone(gate), httpapi.CoverageHeader),
		"/v1/decisions":       gate,
	} {
		var got []string
		for _, p := range doc.Paths[path]["post"].Parameters {
			if p.In == "header" {
				got = append(got, p.Name)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("POST %s: the document lists the headers %v; the route reads %v", path, got, want)
		}
	}
}

// A refusal under the label-mass gate says the mass in significant
// digits, as X-System1-Label-Mass does: a mass of 0.000665 under a gate
// of 0.001 reads 0.000665, never 0.000 < 0.001, on both wires.
func TestLabelMassRefusalSaysASmallMass(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.0005, 0.000165)})
	s := serve(t, setup{nodes: []node{n}})
	const predicate = `{"model":"fake","input":"Ticket: I was charged twice.","questions":[{"type":"predicate","name":"urgent","instructions":"Is it urgent?"}]}`
	r := s.do(t, http.MethodPost, "/v1/decisions", predicate, "X-System1-Min-Label-Mass: 0.001")
	if got := decisionsReadings(t, r); len(got) != 1 || !got[0].Refused {
		t.Fatalf("a mass of 0.000665 under a gate of 0.001: %s", r)
	}
	if h := r.header.Get("X-System1-Refused"); h != "urgent: label mass 0.000665 < 0.001" {
		t.Errorf("X-System1-Refused %q, want urgent: label mass 0.000665 < 0.001", h)
	}
	r = s.ask(t, `{"model":"fake","state":"Ticket: I was charged twice.","questions":{"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`, "X-System1-Min-Label-Mass: 0.001")
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "put only 0.000665 of its probability") {
		t.Errorf("the System One wire: %s, want a 422 saying the mass 0.000665", r)
	}
}

// A question named "" is answered named "", as OpenAI's type allows,
// but no header or log line is keyed by an empty id: it goes by the id
// an unnamed question gets, questions[i].
func TestDecisionsEmptyNameHasAnID(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.6, 0.3)})
	s := serve(t, setup{nodes: []node{n}})
	r := s.do(t, http.MethodPost, "/v1/decisions", `{"model":"fake","input":"Ticket: I was charged twice.","questions":[
		{"type":"predicate","name":"urgent","instructions":"Is it urgent?"},
		{"type":"predicate","name":"","instructions":"Is it a refund?"}]}`, "X-System1-Min-Label-Mass: 0.95")
	got := decisionsReadings(t, r)
	if len(got) != 2 || got[1].Name == nil || *got[1].Name != "" || !got[1].Refused {
		t.Fatalf("a question named \"\": %s", r)
	}
	for _, h := range []string{httpapi.LabelMassHeader, "X-System1-Refused"} {
		if v := r.header.Get(h); !strings.Contains(v, "questions[1]") || strings.HasPrefix(v, "=") || strings.Contains(v, "; =") || strings.Contains(v, "; :") || strings.HasPrefix(v, ":") {
			t.Errorf("%s %q, want the question named \"\" as questions[1]", h, v)
		}
	}
}

// A score's levels reach a System One upstream (hosted Jev, whose
// OpenAPI takes score criteria as an ordered array of entries only) as
// an array, each level's label kept: a level with a description as the
// structured entry {"label", "description"} (openai-decisions-wire.md
// section 8), one without as its label; levels named in a System One
// object the same. Whatever the first level has.
func TestScoreLevelsToSystemOneUpstreamAreAnArray(t *testing.T) {
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	n := node{cfg: config.Node{Name: "jev", URL: ep.URL, Dialect: "systemone", Models: []string{fakeengine.DefaultModel}}}
	s := serve(t, setup{nodes: []node{n}})
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"described levels", "/v1/decisions",
			`{"model":"fake","input":"s","questions":[{"type":"score","name":"mood","instructions":"How upset?","levels":[{"label":"calm","description":"no complaint"},{"label":"angry","description":"threatens to leave"}]}]}`,
			`[{"label":"calm","description":"no complaint"},{"label":"angry","description":"threatens to leave"}]`},
		{"the first level plain, the second described", "/v1/decisions",
			`{"model":"fake","input":"s","questions":[{"type":"score","name":"mood","instructions":"How upset?","levels":[{"label":"calm"},{"label":"angry","description":"threatens to leave"}]}]}`,
			`["calm",{"label":"angry","description":"threatens to leave"}]`},
		{"plain levels", "/v1/decisions",
			`{"model":"fake","input":"s","questions":[{"type":"score","name":"mood","instructions":"How upset?","levels":[{"label":"calm"},{"label":"angry"}]}]}`,
			`["calm","angry"]`},
		{"levels named in an object", "/v1/systemone",
			`{"model":"fake","state":"s","questions":{"mood":{"type":"score","instructions":"How upset?","criteria":{"calm":"no complaint","angry":null}}}}`,
			`[{"label":"calm","description":"no complaint"},"angry"]`},
		{"levels as an array", "/v1/systemone",
			`{"model":"fake","state":"s","questions":{"mood":{"type":"score","instructions":"How upset?","criteria":["calm",{"x":1}]}}}`,
			`["calm",{"x":1}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := s.do(t, http.MethodPost, tc.path, tc.body); r.status != http.StatusOK {
				t.Fatalf("got %s", r)
			}
			var sent struct {
				Questions map[string]struct {
					Criteria json.RawMessage `json:"criteria"`
				} `json:"questions"`
			}
			if err := json.Unmarshal([]byte(ep.LastRequest()), &sent); err != nil {
				t.Fatalf("%v: %s", err, ep.LastRequest())
			}
			if got := string(sent.Questions["mood"].Criteria); got != tc.want {
				t.Errorf("criteria sent upstream %s, want %s", got, tc.want)
			}
		})
	}
}
