package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// ticket asks the three kinds of question about one state, under the
// alias jev-latest.
const ticket = `{"model":"jev-latest","state":"Ticket: I was charged twice.","questions":{
	"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":"bugs and outages","sales":null}},
	"urgent":{"type":"noul","instructions":"Is it urgent?"},
	"mood":{"type":"score","instructions":"How upset is the customer?","criteria":["calm",{"level":"annoyed"},"angry"]}}}`

// answers is the ticket's reply as the test reads it.
type answers struct {
	Model   string
	Answers struct {
		Dept struct {
			Choice        string
			Confidence    float64
			Probabilities map[string]float64
		}
		Urgent struct{ Noul float64 }
		Mood   struct {
			Score         float64
			Confidence    float64
			Probabilities map[string]float64
		}
	}
	Usage struct {
		InputTokens  int  `json:"input_tokens"`
		OutputTokens int  `json:"output_tokens"`
		Estimated    bool `json:"estimated"`
	}
}

func decode(t testing.TB, r reply) answers {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("got %s, want 200", r)
	}
	var a answers
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// The ticket's expected answers under three distributions, worked out by
// hand from the fake's log-probabilities: renormalised over the labels,
// rounded to 2 decimals by largest remainder, choice confidence
// (n p_max - 1)/(n - 1), score confidence 1 - MAD/MAD_uniform.
var distributions = []struct {
	name string
	lp   func([]string) []float64
	want answers
}{
	{
		// 4/7, 2/7, 1/7 = .571, .286, .143: floors 57+28+14 = 99, the
		// largest remainder (.57) gets the last unit. Noul 2/3. Score
		// 4/7; confidence 1 - (4/7)/(2/3) = 1/7.
		name: "halving", lp: fakeengine.Halving,
		want: want("billing", .36, map[string]float64{"billing": .57, "technical": .29, "sales": .14}, .67,
			.57, .14, map[string]float64{"0": .57, "1": .29, "2": .14}),
	},
	{
		// 1/3 each: the tie on remainders goes to the first option.
		// Score 1; the mode is level 0 (first on a tie), so the MAD
		// formula floors at 0.
		name: "uniform", lp: fakeengine.Uniform,
		want: want("billing", 0, map[string]float64{"billing": .34, "technical": .33, "sales": .33}, .5,
			1, 0, map[string]float64{"0": .34, "1": .33, "2": .33}),
	},
	{
		// .1, .2, .7: the last option wins, conf (2.1-1)/2 = .55. Noul
		// .1/.3. Score .2 + 1.4 = 1.6; mode 2, MAD .4, 1 - .4/(2/3) = .4.
		name: "skewed", lp: fakeengine.Probs(.1, .2, .7),
		want: want("sales", .55, map[string]float64{"billing": .1, "technical": .2, "sales": .7}, .33,
			1.6, .4, map[string]float64{"0": .1, "1": .2, "2": .7}),
	},
}

func want(choice string, cconf float64, cp map[string]float64, noul, score, sconf float64, sp map[string]float64) answers {
	var a answers
	a.Model = fakeengine.DefaultModel
	a.Answers.Dept.Choice, a.Answers.Dept.Confidence, a.Answers.Dept.Probabilities = choice, cconf, cp
	a.Answers.Urgent.Noul = noul
	a.Answers.Mood.Score, a.Answers.Mood.Confidence, a.Answers.Mood.Probabilities = score, sconf, sp
	return a
}

// Each dialect answers a choice, a noul and a score with exactly the
// probabilities the engine's log-probabilities imply, sums the engine's
// token counts, and sends the engine what system1 promises: one token at
// temperature 0 with logprobs, thinking off where the dialect has a
// switch, llama.cpp's prompt cache and no grammar, each question's labels,
// and every prompt starting with the shared state.
func TestDialectsAnswerExactly(t *testing.T) {
	for _, d := range []fakeengine.Dialect{fakeengine.LlamaCpp, fakeengine.OpenAI, fakeengine.Ollama} {
		for _, dist := range distributions {
			t.Run(string(d)+"/"+dist.name, func(t *testing.T) {
				n := startNode(t, "n", d, fakeengine.Behavior{Logprobs: dist.lp})
				s := serve(t, setup{nodes: []node{n}, aliases: map[string]string{"jev-latest": fakeengine.DefaultModel}})
				got := decode(t, s.ask(t, ticket))
				reqs := n.fake.Inferences()
				want := dist.want
				want.Usage.OutputTokens = len(reqs)
				for _, r := range reqs {
					want.Usage.InputTokens += r.InputTokens
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got  %+v\nwant %+v", got, want)
				}
				if len(reqs) != 3 {
					t.Errorf("%d engine calls for 3 questions", len(reqs))
				}
				checkSent(t, d, reqs)
			})
		}
	}
}

// checkSent checks the engine requests of the ticket.
func checkSent(t *testing.T, d fakeengine.Dialect, reqs []fakeengine.Request) {
	t.Helper()
	labels := map[string][]string{
		"Which department?":          {"A", "B", "C"},
		"Is it urgent?":              {"A", "B"},
		"How upset is the customer?": {"0", "1", "2"},
	}
	for _, r := range reqs {
		if r.Model != fakeengine.DefaultModel {
			t.Errorf("engine asked for model %q; the alias resolves to %q", r.Model, fakeengine.DefaultModel)
		}
		if r.Temperature == nil || *r.Temperature != 0 || r.MaxTokens != 1 || !r.Logprobs || r.TopLogprobs < len(r.Labels) || r.Stream {
			t.Errorf("temperature %v, max tokens %d, logprobs %v, top %d, stream %v", r.Temperature, r.MaxTokens, r.Logprobs, r.TopLogprobs, r.Stream)
		}
		if !strings.HasPrefix(r.User, "State:\nTicket: I was charged twice.\n\n") || r.System != reqs[0].System {
			t.Errorf("prompt does not start with the shared state:\n%s\n%s", r.System, r.User)
		}
		var question string
		for q := range labels {
			if strings.Contains(r.User, q) {
				question = q
			}
		}
		if !slices.Equal(r.Labels, labels[question]) {
			t.Errorf("%q offers labels %q, want %q", question, r.Labels, labels[question])
		}
		switch d {
		case fakeengine.LlamaCpp:
			// llama-server reports values from before a grammar: one
			// would only cost it a pass over the vocabulary.
			if bytes.Contains(r.Body, []byte(`"grammar"`)) || !r.CachePrompt || r.Thinking == nil || *r.Thinking {
				t.Errorf("llama.cpp: body %s, cache_prompt %v, thinking %v", r.Body, r.CachePrompt, r.Thinking)
			}
		case fakeengine.Ollama:
			if r.Thinking == nil || *r.Thinking {
				t.Errorf("ollama: think %v, want false", r.Thinking)
			}
		case fakeengine.OpenAI:
			if r.CachePrompt || r.Thinking != nil { // hosted APIs refuse fields they do not know
				t.Errorf("openai: cache_prompt %v, thinking %v", r.CachePrompt, r.Thinking)
			}
		}
	}
}

// An engine that reports no token counts gets them estimated at four
// characters a token, and the usage says so.
func TestEstimatedUsage(t *testing.T) {
	for _, d := range []fakeengine.Dialect{fakeengine.LlamaCpp, fakeengine.OpenAI, fakeengine.Ollama} {
		t.Run(string(d), func(t *testing.T) {
			n := startNode(t, "n", d, fakeengine.Behavior{NoUsage: true})
			s := serve(t, setup{nodes: []node{n}, aliases: map[string]string{"jev-latest": fakeengine.DefaultModel}})
			got := decode(t, s.ask(t, ticket))
			in := 0
			for _, r := range n.fake.Inferences() {
				in += (len(r.System) + len(r.User) + 3) / 4
			}
			if !got.Usage.Estimated || got.Usage.InputTokens != in || got.Usage.OutputTokens != 3 {
				t.Errorf("usage %+v, want %d input tokens, 3 output, estimated", got.Usage, in)
			}
		})
	}
}

// nodeHealth is one node in GET /health.
type nodeHealth struct {
	Name       string `json:"name"`
	Healthy    bool   `json:"healthy"`
	CoolReason string `json:"cool_reason"`
	// ModelCooldowns are the models resting on a healthy node.
	ModelCooldowns []struct {
		Model  string `json:"model"`
		Reason string `json:"reason"`
	} `json:"model_cooldowns"`
}

// cooling reports whether h shows model resting on the node for a reason
// holding why, the node itself healthy.
func (h nodeHealth) cooling(model, why string) bool {
	for _, c := range h.ModelCooldowns {
		if c.Model == model && strings.Contains(c.Reason, why) {
			return h.Healthy
		}
	}
	return false
}

func health(t testing.TB, s *system1) map[string]nodeHealth {
	t.Helper()
	r := s.do(t, http.MethodGet, "/health", "")
	var h struct {
		Status string
		Nodes  []nodeHealth
	}
	if err := json.Unmarshal(r.body, &h); err != nil || r.status != http.StatusOK || h.Status != "ok" {
		t.Fatalf("health: %s (%v)", r, err)
	}
	out := map[string]nodeHealth{}
	for _, n := range h.Nodes {
		out[n.Name] = n
	}
	return out
}

// A node that fails is skipped for the next node serving the model (here
// a fallback of lower priority, of another dialect), the caller gets the
// good node's answers, and the failing node is cooled down: GET /health
// shows it unhealthy with the reason, and later requests do not reach it.
// A node that is down (refused, 5xx) cools at once, one that rate-limits
// for as long as it asked; one that times out or answers garbage cools
// after the policy's three failures. A 404 for the model cools the model
// on that node at once, the node staying healthy for its other models.
func TestFailover(t *testing.T) {
	down, strikes := 1, fleet.DefaultPolicy.AllowedFails
	for _, tc := range []struct {
		name     string
		bad      fakeengine.Behavior
		discover bool   // the bad node lists the model rather than the config claiming it
		fails    int    // failed requests until the node cools
		reason   string // in the bad node's cool_reason
		model    bool   // the model cools on the node, not the node
	}{
		{name: "refused", bad: fakeengine.Behavior{Fault: fakeengine.Refuse}, fails: down, reason: "unavailable"},
		{name: "500", bad: fakeengine.Behavior{Fault: fakeengine.Status, Status: 500}, fails: down, reason: "HTTP 500"},
		{name: "502", bad: fakeengine.Behavior{Fault: fakeengine.Status, Status: 502}, fails: down, reason: "HTTP 502"},
		{name: "503", bad: fakeengine.Behavior{Fault: fakeengine.Status, Status: 503}, fails: down, reason: "HTTP 503"},
		{name: "claims the model, then 404", bad: fakeengine.Behavior{Fault: fakeengine.Status, Status: 404}, fails: down, reason: "HTTP 404", model: true},
		{name: "lists the model, then 404", bad: fakeengine.Behavior{Fault: fakeengine.Status, Status: 404}, discover: true, fails: down, reason: "HTTP 404", model: true},
		{name: "429", bad: fakeengine.Behavior{Fault: fakeengine.Status, Status: 429, RetryAfter: "120"}, fails: down, reason: "rate_limited"},
		{name: "timeout", bad: fakeengine.Behavior{Fault: fakeengine.Hang}, fails: strikes, reason: "timeout"},
		{name: "stalls mid-body", bad: fakeengine.Behavior{Fault: fakeengine.Stall}, fails: strikes, reason: "timeout"},
		{name: "slower than its timeout", bad: fakeengine.Behavior{Latency: time.Hour}, fails: strikes, reason: "timeout"},
		{name: "not JSON", bad: fakeengine.Behavior{Fault: fakeengine.NotJSON}, fails: strikes, reason: "malformed"},
		{name: "no logprobs", bad: fakeengine.Behavior{Fault: fakeengine.NoLogprobs}, fails: strikes, reason: "malformed"},
		{name: "empty choices", bad: fakeengine.Behavior{Fault: fakeengine.EmptyChoices}, fails: strikes, reason: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := startNode(t, "bad", fakeengine.LlamaCpp, tc.bad, func(c *config.Node) {
				// The client gives up on a hung node soon; a node that fails
				// otherwise gets time enough, so that a loaded machine cannot
				// turn its failure into a timeout.
				c.Timeout = config.Duration(10 * time.Second)
				if tc.reason == "timeout" {
					c.Timeout = config.Duration(100 * time.Millisecond)
				}
				if tc.discover {
					discovered(c)
				}
			})
			good := startNode(t, "good", fakeengine.Ollama, fakeengine.Behavior{}, fallback)
			s := serve(t, setup{nodes: []node{bad, good}, aliases: map[string]string{"jev-latest": fakeengine.DefaultModel}})

			for i := range tc.fails {
				if h := health(t, s)["bad"]; !h.Healthy {
					t.Fatalf("request %d: the bad node cooled too soon: %+v", i+1, h)
				}
				got := decode(t, s.ask(t, ticket))
				if want := distributions[0].want.Answers; !reflect.DeepEqual(got.Answers, want) {
					t.Errorf("answers %+v, want the good node's %+v", got.Answers, want)
				}
				if n := len(good.fake.Inferences()); n != 3*(i+1) {
					t.Errorf("the good node answered %d questions of %d", n, 3*(i+1))
				}
			}
			h := health(t, s)
			if b := h["bad"]; tc.model && !b.cooling(fakeengine.DefaultModel, tc.reason) {
				t.Errorf("bad node %+v, want model %s cooling down on it for %q", b, fakeengine.DefaultModel, tc.reason)
			} else if !tc.model && (b.Healthy || !strings.Contains(b.CoolReason, tc.reason)) {
				t.Errorf("bad node %+v, want cooling down for %q", b, tc.reason)
			}
			if !h["good"].Healthy {
				t.Errorf("good node %+v", h["good"])
			}

			tried := len(bad.fake.Inferences())
			decode(t, s.ask(t, ticket))
			if again := len(bad.fake.Inferences()); again != tried {
				t.Errorf("the cooled node got %d more calls", again-tried)
			}
		})
	}
}

// When every node fails, the reply is a 503 naming each unanswered
// question and its last failure; nodes that asked for a pause pass their
// Retry-After on, in both headers the 429s send (Retry-After-Ms too).
func TestEveryNodeFails(t *testing.T) {
	for _, tc := range []struct {
		name         string
		b            fakeengine.Behavior
		reason       string
		retryAfter   string
		retryAfterMs string
	}{
		{"500", fakeengine.Behavior{Fault: fakeengine.Status, Status: 500}, "HTTP 500", "", ""},
		{"garbage", fakeengine.Behavior{Fault: fakeengine.NotJSON}, "malformed", "", ""},
		{"429", fakeengine.Behavior{Fault: fakeengine.Status, Status: 429, RetryAfter: "7"}, "HTTP 429", "7", "7000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startNode(t, "a", fakeengine.OpenAI, tc.b)
			b := startNode(t, "b", fakeengine.LlamaCpp, tc.b)
			s := serve(t, setup{nodes: []node{a, b}, aliases: map[string]string{"jev-latest": fakeengine.DefaultModel}})
			r := s.ask(t, ticket)
			wantError(t, r, http.StatusServiceUnavailable, "service_unavailable_error", `"dept"`, `"urgent"`, `"mood"`, tc.reason)
			if got := r.header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if got := r.header.Get("Retry-After-Ms"); got != tc.retryAfterMs {
				t.Errorf("Retry-After-Ms %q, want %q", got, tc.retryAfterMs)
			}
			if len(a.fake.Inferences()) == 0 || len(b.fake.Inferences()) == 0 {
				t.Errorf("nodes a and b got %d and %d calls; both must be tried", len(a.fake.Inferences()), len(b.fake.Inferences()))
			}
		})
	}
}

// A log-probability that is not one (NaN, null, ±Infinity, above 0)
// never becomes a probability: with a good node beside it the good
// node's answer comes back, and alone it is a 503 without a number in
// sight.
func TestBadLogprobsNeverReachTheReply(t *testing.T) {
	for _, f := range []fakeengine.Fault{fakeengine.NaN, fakeengine.NullLogprob, fakeengine.PosInf, fakeengine.NegInf, fakeengine.Positive, fakeengine.DuplicateLabel} {
		for _, d := range []fakeengine.Dialect{fakeengine.LlamaCpp, fakeengine.OpenAI, fakeengine.Ollama} {
			bad := fakeengine.Behavior{Fault: f, Label: 1}
			t.Run(fmt.Sprintf("%s/%s/alone", f, d), func(t *testing.T) {
				s := serve(t, setup{nodes: []node{startNode(t, "bad", d, bad)}, aliases: map[string]string{"jev-latest": fakeengine.DefaultModel}})
				r := s.ask(t, ticket)
				wantError(t, r, http.StatusServiceUnavailable, "service_unavailable_error", "malformed", `"dept"`, `"urgent"`, `"mood"`)
				var body map[string]any
				if err := json.Unmarshal(r.body, &body); err != nil || body["answers"] != nil {
					t.Errorf("reply carries answers: %s", r.body)
				}
			})
			t.Run(fmt.Sprintf("%s/%s/with a good node", f, d), func(t *testing.T) {
				b := startNode(t, "bad", d, bad)
				s := serve(t, setup{
					nodes:   []node{b, startNode(t, "good", d, fakeengine.Behavior{}, fallback)},
					aliases: map[string]string{"jev-latest": fakeengine.DefaultModel},
				})
				got := decode(t, s.ask(t, ticket))
				if want := distributions[0].want.Answers; !reflect.DeepEqual(got.Answers, want) {
					t.Errorf("answers %+v, want the good node's %+v", got.Answers, want)
				}
				if len(b.fake.Inferences()) == 0 {
					t.Error("the bad node was not tried first")
				}
			})
		}
	}
}

// A label missing from the engine's top log-probabilities is reported as
// 0, which is only a bound, and the reply says so in a header.
func TestMissingLabelIsFlagged(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{Fault: fakeengine.MissingLabel, Label: 2})
	s := serve(t, setup{nodes: []node{n}})
	r := s.ask(t, `{"model":"fake","state":"s","questions":{"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}}}}`)
	var a answers
	if err := json.Unmarshal(r.body, &a); err != nil || r.status != http.StatusOK {
		t.Fatalf("%s: %v", r, err)
	}
	// 1/2 and 1/4 renormalised: 2/3 and 1/3.
	if want := map[string]float64{"billing": .67, "technical": .33, "sales": 0}; !reflect.DeepEqual(a.Answers.Dept.Probabilities, want) {
		t.Errorf("probabilities %v, want %v", a.Answers.Dept.Probabilities, want)
	}
	if w := r.header.Get("X-System1-Warnings"); !strings.Contains(w, "dept") || !strings.Contains(w, "sales") {
		t.Errorf("warning header %q does not name dept and sales", w)
	}
}

// Concurrent clients over several states and two nodes all get their
// exact answers; run with -race this also looks for data races in the
// server and router.
func TestConcurrentClients(t *testing.T) {
	a := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{})
	b := startNode(t, "b", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{a, b}, aliases: map[string]string{"jev-latest": fakeengine.DefaultModel}})
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			for i := range 5 {
				body := strings.Replace(ticket, "charged twice", fmt.Sprintf("charged %d times", c*5+i), 1)
				// Not s.ask, whose t.Fatal must not run off the test's goroutine.
				resp, err := s.client.Post(s.URL+"/v1/systemone", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				var got answers
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				if want := distributions[0].want.Answers; err != nil || resp.StatusCode != http.StatusOK || !reflect.DeepEqual(got.Answers, want) {
					t.Errorf("status %d, answers %+v (%v), want %+v", resp.StatusCode, got.Answers, err, want)
				}
			}
		})
	}
	wg.Wait()
	if n := len(a.fake.Inferences()) + len(b.fake.Inferences()); n != 16*5*3 {
		t.Errorf("%d engine calls for %d questions", n, 16*5*3)
	}
}

// X-System1-Served names the node, the model and the fingerprint of the
// build that answered: unknown before the node was probed, its
// fingerprint after; per question when two nodes served them.
func TestSystemOneServedHeader(t *testing.T) {
	a := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{})
	a.fake.SetBuild("one")
	if got := serve(t, setup{nodes: []node{a}}).ask(t, noulQ).header.Get("X-System1-Served"); got != "node=a model=fake fingerprint=unknown" {
		t.Errorf("before a probe: X-System1-Served %q", got)
	}
	got := serve(t, setup{nodes: []node{a}, probe: true}).ask(t, noulQ).header.Get("X-System1-Served")
	if !regexp.MustCompile(`^node=a model=fake fingerprint=[0-9a-f]{16}$`).MatchString(got) {
		t.Errorf("after a probe: X-System1-Served %q", got)
	}
}
