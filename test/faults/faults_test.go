// Package faults_test is system1's fault matrix: every way an engine or a
// System One endpoint can fail, put on each face that callers use, each
// with the outcome it must have. The faults come from fake engines
// (internal/fakeengine, in each of its dialects) and a fake System One
// endpoint (upstream, in fakes_test.go) that misbehave on command; system1
// is the real thing in front of them: the HTTP server and the fleet
// router for /v1/systemone; the gateway behind that server's
// POST /v1/decide, and the built binary's system1_decide over MCP.
//
// Whatever the fault, no probability is ever made up: an error carries no
// number at all, and an answer carries exactly the numbers of the node or
// provider that gave it. Every row checks both.
package faults_test

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/systemone"
)

// B is a fake's behaviour: its fault, and the label or option it hits.
type B = fakeengine.Behavior

// Timeouts. A node or provider that must give up on a fault gives up
// after short (soon, but with room for llama.cpp's tokenizer calls before
// the inference call even on busy cores), or brief in the rows that run
// alone; a deadline that must pass is deadline; a node or provider that
// must not give up (a good one, a fault that ends by itself) has long,
// which no row ever waits out.
const (
	short    = 2 * time.Second
	brief    = time.Second
	deadline = 3 * time.Second
	long     = 10 * time.Second
)

// ticket is the /v1/systemone request of every row: a choice over three
// options and a noul, over one state.
const ticket = `{"model":"fake","state":"Ticket: I was charged twice.","questions":{` +
	`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":"bugs and outages","sales":null}},` +
	`"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`

// answers are a 200's numbers, as printed (2 decimals, by largest
// remainder): the choice's probabilities, choice and confidence
// ((n p_max - 1)/(n - 1)), and the noul.
type answers struct {
	Dept       map[string]float64
	Choice     string
	Confidence float64
	Urgent     float64
}

var (
	// halvingAnswers are fakeengine's default distribution as system1
	// reports it: 4/7, 2/7, 1/7 = .571, .286, .143, whose floors 57, 28,
	// 14 leave one unit for the largest remainder (.57 of 28.57);
	// confidence (12/7 - 1)/2 = 5/14; the noul 2/3.
	halvingAnswers = answers{Dept: map[string]float64{"billing": .57, "technical": .29, "sales": .14}, Choice: "billing", Confidence: .36, Urgent: .67}
	// missingAnswers: sales left out of the top-k is 0, and the rest
	// renormalise to 1/2 : 1/4, so 2/3 and 1/3.
	missingAnswers = answers{Dept: map[string]float64{"billing": .67, "technical": .33, "sales": 0}, Choice: "billing", Confidence: .5, Urgent: .67}
	// summedAnswers: sales' two same-text entries of 1/8 sum to 1/4 (the
	// top-k then sums to 1, so nothing is over): 1/2, 1/4, 1/4.
	summedAnswers = answers{Dept: map[string]float64{"billing": .5, "technical": .25, "sales": .25}, Choice: "billing", Confidence: .25, Urgent: .67}
)

// missingWarning is the X-System1-Warnings header when sales is missing
// from the top-k; missingDetail the gateway attempt's note of it.
const (
	missingWarning = "dept: options sales were not in the engine's top log-probabilities; reported 0"
	missingDetail  = `decision: options sales were not in the engine's top log-probabilities; reported 0`
)

// systemOneRow is one fault on the /v1/systemone face.
//
// How to read a row. The fault is put on node "bad" of each target in
// `on` (an engine node of that dialect, or a System One upstream node);
// behind it, of lower priority, is node "good" of the same kind, which
// answers correctly, or with `alone` a second faulty node "bad2". Both
// claim the requested model in their configuration, and system1 is asked
// `ticket`. The rest of the row is what must happen: the HTTP status;
// for an error, its type, words its message holds (each question is
// always named too) and its Retry-After header; the attempts the router
// recorded, as node:outcome in order, runs of one node's questions
// collapsed into one (so "good:ok" last means the fallback answered);
// how many inference requests the faulty node got (engine chat calls, or
// System One requests, which carry every question); for a 200 the exact
// numbers (answers, nil meaning the good node's halvingAnswers) and the
// X-System1-Warnings header; and whether the faulty node is cooling down
// afterwards (the policy: refused, 5xx and 404 at once, 429 for its
// Retry-After, timeouts and garbage only after three). honour, again,
// late and hangUp add steps, described on the fields.
type systemOneRow struct {
	name string
	on   []target
	bad  B

	timeout   time.Duration // the faulty nodes' timeout; 0 is long
	deadline  time.Duration // the request's; 0 is long
	maxLabels int           // the faulty node's max_labels (an openai node's top_logprobs)
	alone     bool          // every node is faulty: no good node

	status     int
	errType    string
	errHas     []string
	retryAfter string
	attempts   string
	badCalls   int
	answers    *answers
	warn       string
	cooled     bool
	// modelCooled: the model rests on the faulty node, the node healthy.
	modelCooled bool

	// honour: the node is cooling down for exactly the Retry-After it
	// sent, and a second request, well within it, does not reach it.
	honour bool
	// again: once the Retry-After has passed, the node is asked again.
	again bool
	// late: the node answers only after system1 gave up on it (an engine
	// by its latency, an upstream when released); afterwards no goroutine
	// is left running system1's code and the goroutine count is back.
	late bool
	// hangUp: the caller hangs up while the node holds its request; no
	// other node is asked, the node is not blamed for it (not cooled),
	// and nothing is left running.
	hangUp bool
}

// systemOneRows is the /v1/systemone fault matrix; systemOneRow says how
// to read a row.
var systemOneRows = []systemOneRow{
	{name: "refuses connections", on: everywhere, bad: B{Fault: fakeengine.Refuse},
		status: 200, attempts: "bad:unavailable good:ok", badCalls: 0, cooled: true},
	{name: "accepts and never answers: the node's timeout", on: everywhere, bad: B{Fault: fakeengine.Hang}, timeout: short,
		status: 200, attempts: "bad:timeout good:ok", badCalls: 1},
	{name: "every node hangs: the request's deadline", on: everywhere, bad: B{Fault: fakeengine.Hang}, alone: true, deadline: deadline,
		status: 503, errType: systemone.Unavailable, errHas: []string{"context deadline exceeded", "timeout"}, attempts: "bad:timeout", badCalls: 1},
	{name: "500", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 500},
		status: 200, attempts: "bad:unavailable good:ok", badCalls: 1, cooled: true},
	{name: "502", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 502},
		status: 200, attempts: "bad:unavailable good:ok", badCalls: 1, cooled: true},
	{name: "503", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 503},
		status: 200, attempts: "bad:unavailable good:ok", badCalls: 1, cooled: true},
	{name: "429 with Retry-After: not asked again before it", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 429, RetryAfter: "30"},
		status: 200, attempts: "bad:rate_limited good:ok", badCalls: 1, cooled: true, honour: true},
	{name: "429 with Retry-After: asked again once it has passed", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 429, RetryAfter: "1"},
		status: 200, attempts: "bad:rate_limited good:ok", badCalls: 1, cooled: true, again: true},
	{name: "every node 429: the Retry-After is passed on", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 429, RetryAfter: "1"}, alone: true,
		status: 503, errType: systemone.Unavailable, errHas: []string{"HTTP 429"}, retryAfter: "1", attempts: "bad:rate_limited bad2:rate_limited", badCalls: 1, cooled: true},
	{name: "body not JSON", on: everywhere, bad: B{Fault: fakeengine.NotJSON},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "JSON without logprobs (System One: without answers)", on: everywhere, bad: B{Fault: fakeengine.NoLogprobs},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "logprobs null (System One: answers null)", on: everywhere, bad: B{Fault: fakeengine.NullLogprobs},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "logprob NaN, as Python writes it", on: everywhere, bad: B{Fault: fakeengine.NaN, Label: 1},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "logprob Infinity, as Python writes it", on: everywhere, bad: B{Fault: fakeengine.PosInf, Label: 1},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	// -Infinity is a masked label's honest value, but the literal is not
	// JSON: the reply cannot be read, so none of it is used.
	{name: "logprob -Infinity, as Python writes it", on: everywhere, bad: B{Fault: fakeengine.NegInf, Label: 1},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "logprob null, as llama.cpp writes NaN and ±Inf", on: everywhere, bad: B{Fault: fakeengine.NullLogprob, Label: 1},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "logprob above 0 (System One: probability 1.5)", on: everywhere, bad: B{Fault: fakeengine.Positive, Label: 1},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "every node's logprob NaN", on: engines, bad: B{Fault: fakeengine.NaN, Label: 1}, alone: true,
		status: 503, errType: systemone.Unavailable, errHas: []string{"malformed"}, attempts: "bad:malformed bad2:malformed", badCalls: 1},
	// Not a failure: 0 is a bound, said in the header. llama.cpp first
	// reads the top 64 and, a label missing that could matter, asks again
	// for the top 1024: three calls for the two questions.
	{name: "label missing from the top-k: answered, reported 0, flagged", on: []target{openai, ollama}, bad: B{Fault: fakeengine.MissingLabel, Label: 2},
		status: 200, attempts: "bad:ok", badCalls: 2, answers: &missingAnswers, warn: missingWarning},
	{name: "label missing from the top-k: answered, reported 0, flagged", on: []target{llamacpp}, bad: B{Fault: fakeengine.MissingLabel, Label: 2},
		status: 200, attempts: "bad:ok", badCalls: 3, answers: &missingAnswers, warn: missingWarning},
	// The likeliest label out of the top: llama.cpp's wide read carries a
	// grammar, under which the server generates that label and reports
	// its value, so nothing is missing (each question's first read misses
	// it; the second question is read wide at once).
	{name: "likeliest label missing from the top-k: read from the wide read's generated token", on: []target{llamacpp}, bad: B{Fault: fakeengine.MissingLabel, Label: 0},
		status: 200, attempts: "bad:ok", badCalls: 3, answers: &halvingAnswers},
	// A System One reply must carry every option: one without is unusable.
	{name: "option missing from a System One reply", on: []target{systemOne}, bad: B{Fault: fakeengine.MissingLabel, Label: 2},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	// llama.cpp labels are matched by token id: one id twice is not a
	// top-k any engine makes.
	{name: "duplicate label, llama.cpp: one token id twice", on: []target{llamacpp}, bad: B{Fault: fakeengine.DuplicateLabel, Label: 1},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	// OpenAI and Ollama report no ids, so labels are matched by text and
	// same-text entries summed (distinct tokens can spell one label); an
	// entry repeated outright then shows as a top-k over 1.
	{name: "duplicate label by text, the top-k then over 1", on: []target{openai, ollama}, bad: B{Fault: fakeengine.DuplicateLabel, Label: 1},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "duplicate label by text within 1: summed", on: []target{openai}, bad: B{Fault: fakeengine.DuplicateLabel, Label: 2}, maxLabels: 3,
		status: 200, attempts: "bad:ok", badCalls: 2, answers: &summedAnswers},
	{name: "empty choices (Ollama: empty logprobs; System One: empty answers)", on: everywhere, bad: B{Fault: fakeengine.EmptyChoices},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	{name: "stalls mid-body", on: everywhere, bad: B{Fault: fakeengine.Stall}, timeout: short,
		status: 200, attempts: "bad:timeout good:ok", badCalls: 1},
	// A 404 for the model is that model's problem: it rests on the node.
	{name: "claims the model, then 404", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 404},
		status: 200, attempts: "bad:unavailable good:ok", badCalls: 1, modelCooled: true},
	{name: "answers a choice outside the options", on: []target{systemOne}, bad: B{Fault: OutsideOptions},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	// The engine's own way to answer outside the options: no label in its
	// top-k, only a token that is none of them.
	{name: "no label in the top-k", on: []target{openai}, bad: B{Logprobs: fakeengine.Probs()},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 1},
	// Ollama gets a request's first question alone (leadFirst); one the
	// model ranked no label of says nothing of the node, so the second
	// is sent too.
	{name: "no label in the top-k", on: []target{ollama}, bad: B{Logprobs: fakeengine.Probs()},
		status: 200, attempts: "bad:malformed good:ok", badCalls: 2},
	{name: "no label in the top-k", on: []target{llamacpp}, bad: B{Logprobs: fakeengine.Probs()}, // the first question asked again for the top 1024, the second (the model now wide) for the top 1024 at once
		status: 200, attempts: "bad:malformed good:ok", badCalls: 3},
	// Where every node reads so, the question is refused, not failed:
	// asking again reads the same, so it is no 503 for a client to retry.
	{name: "no label in the top-k on every node: refused", on: []target{openai}, bad: B{Logprobs: fakeengine.Probs()}, alone: true,
		status: 422, errType: systemone.InvalidRequest, errHas: []string{"will not stand behind", "ranked none of the labels"}, attempts: "bad:malformed bad2:malformed", badCalls: 1},
	{name: "no label in the top-k on every node: refused", on: []target{ollama}, bad: B{Logprobs: fakeengine.Probs()}, alone: true,
		status: 422, errType: systemone.InvalidRequest, errHas: []string{"will not stand behind", "ranked none of the labels"}, attempts: "bad:malformed bad2:malformed", badCalls: 2},
	{name: "no label in the top-k on every node: refused", on: []target{llamacpp}, bad: B{Logprobs: fakeengine.Probs()}, alone: true,
		status: 422, errType: systemone.InvalidRequest, errHas: []string{"will not stand behind", "ranked none of the labels"}, attempts: "bad:malformed bad2:malformed", badCalls: 3},
	{name: "every node down", on: everywhere, bad: B{Fault: fakeengine.Refuse}, alone: true,
		status: 503, errType: systemone.Unavailable, errHas: []string{"unavailable"}, attempts: "bad:unavailable bad2:unavailable", badCalls: 0, cooled: true},
	{name: "answers after system1 gave up", on: everywhere, bad: B{Fault: Late}, timeout: brief,
		status: 200, attempts: "bad:timeout good:ok", badCalls: 1, late: true},
	{name: "the caller hangs up while the node holds the request", on: everywhere, bad: B{Fault: fakeengine.Hang},
		attempts: "bad:canceled", badCalls: 1, hangUp: true},
}

// TestSystemOneFaults runs the /v1/systemone fault matrix.
func TestSystemOneFaults(t *testing.T) {
	for _, row := range systemOneRows {
		for _, tg := range row.on {
			t.Run(row.name+"/"+string(tg), func(t *testing.T) {
				if !row.late && !row.hangUp { // those count goroutines: alone
					t.Parallel()
				}
				runSystemOneRow(t, row, tg)
			})
		}
	}
}

// sentTogether is how many requests a node that fails both of the
// ticket's questions gets, where the row says one: OpenAI-style engines
// are sent a request's questions at once, llama.cpp (spreading them over
// slots once the first has prefilled the state) and Ollama the first
// question alone (so a node that fails it gets no more), and a System One
// upstream the whole request in one call.
func sentTogether(row systemOneRow, tg target) int {
	if row.badCalls == 1 && together(tg) {
		return 2
	}
	return row.badCalls
}

func together(tg target) bool { return tg == openai }

func runSystemOneRow(t *testing.T, row systemOneRow, tg target) {
	base := runtime.NumGoroutine()
	row.badCalls = sentTogether(row, tg)
	bad := startNode(t, "bad", tg, row.bad, or(row.timeout, long))
	bad.cfg.MaxLabels = row.maxLabels
	behind := startNode(t, "good", tg, B{}, long)
	if row.alone {
		behind = startNode(t, "bad2", tg, row.bad, or(row.timeout, long))
	}
	behind.cfg.Priority = 1
	s := serve(t, []*node{bad, behind}, nil, or(row.deadline, long), nil)

	if row.hangUp {
		hangUp(t, s, bad, "/v1/systemone", ticket)
		noneLeft(t, s, base)
		if got := s.obs.take(); got != row.attempts {
			t.Errorf("attempts %q, want %q", got, row.attempts)
		}
		if n := behind.calls(); n != 0 {
			t.Errorf("node %s was asked %d times after the caller hung up", behind.cfg.Name, n)
		}
		if !state(t, s.router, "bad").Healthy {
			t.Error("the node is cooling down for the caller's hang-up")
		}
		slotsFree(t, s.router)
		return
	}

	before := time.Now()
	r := s.mustPost(t, "/v1/systemone", ticket)
	after := time.Now() // the node's pause began between before and after
	checkSystemOne(t, row, r)
	if got := s.obs.take(); got != row.attempts {
		t.Errorf("attempts %q, want %q", got, row.attempts)
	}
	if n := bad.calls(); n != row.badCalls {
		t.Errorf("the faulty node got %d inference requests, want %d", n, row.badCalls)
	}
	if got := !state(t, s.router, "bad").Healthy; got != row.cooled {
		t.Errorf("the faulty node cooling down: %v, want %v", got, row.cooled)
	}
	if got := len(state(t, s.router, "bad").ModelCooldowns) > 0; got != row.modelCooled {
		t.Errorf("a model cooling down on the faulty node: %v, want %v", got, row.modelCooled)
	}

	if row.honour {
		pausedFor(t, row.bad, before, after, state(t, s.router, "bad").CoolUntil)
		checkSystemOne(t, row, s.mustPost(t, "/v1/systemone", ticket))
		if got := s.obs.take(); got != "good:ok" {
			t.Errorf("within the Retry-After: attempts %q, want only good:ok", got)
		}
		if n := bad.calls(); n != row.badCalls {
			t.Errorf("within the Retry-After the node was asked again: %d requests, want %d", n, row.badCalls)
		}
	}
	if row.again {
		time.Sleep(time.Until(after.Add(retryAfter(t, row.bad)))) // waiting out the pause is the point
		checkSystemOne(t, row, s.mustPost(t, "/v1/systemone", ticket))
		if got := s.obs.take(); got != row.attempts {
			t.Errorf("after the Retry-After: attempts %q, want %q", got, row.attempts)
		}
		again := row.badCalls + 1
		if together(tg) {
			again = row.badCalls + 2
		}
		if n := bad.calls(); n != again {
			t.Errorf("after the Retry-After the node got %d requests, want %d", n, again)
		}
	}
	if row.late {
		bad.release()
		bad.waitIdle(t)
		noneLeft(t, s, base)
	}
	slotsFree(t, s.router)
}

// slotsFree checks that once the requests are answered every node's
// slots are given back: none in flight, none queued, whatever failed.
func slotsFree(t testing.TB, r *fleet.Router) {
	t.Helper()
	eventually(t, "every node's slots are free", func() bool {
		for _, st := range r.States() {
			if st.InFlight != 0 || st.Queued != 0 {
				return false
			}
		}
		return true
	})
}

// checkSystemOne checks a /v1/systemone reply against the row: the status;
// an error without a single number, naming each question; a 200 with
// exactly the expected numbers, which real clients accept.
func checkSystemOne(t *testing.T, row systemOneRow, r reply) {
	t.Helper()
	if r.status != row.status {
		t.Fatalf("got %s, want status %d", r, row.status)
	}
	if r.status != http.StatusOK {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &top); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if keys := slices.Sorted(maps.Keys(top)); !slices.Equal(keys, []string{"detail", "error"}) {
			t.Errorf("error body with fields %v (no answers, nothing but the error): %s", keys, r.body)
		}
		var e struct {
			Error struct{ Message, Type string }
		}
		_ = json.Unmarshal(r.body, &e)
		if e.Error.Type != row.errType {
			t.Errorf("error type %q, want %s", e.Error.Type, row.errType)
		}
		names := []string{`"dept"`, `"urgent"`}
		if r.status == http.StatusUnprocessableEntity { // named by their path
			names = []string{"questions.dept", "questions.urgent"}
		}
		for _, s := range append(names, row.errHas...) {
			if !strings.Contains(e.Error.Message, s) {
				t.Errorf("message %q does not mention %s", e.Error.Message, s)
			}
		}
		if got := r.header.Get("Retry-After"); got != row.retryAfter {
			t.Errorf("Retry-After %q, want %q", got, row.retryAfter)
		}
		return
	}
	req := systemone.ParseRequest([]byte(ticket)).Request
	if _, err := systemone.ParseResponse(req, r.body); err != nil {
		t.Errorf("a 200 that real clients reject: %v\n%s", err, r.body)
	}
	var body struct {
		Model   string
		Answers struct {
			Dept struct {
				Choice        string
				Confidence    float64
				Probabilities map[string]float64
			}
			Urgent struct{ Noul float64 }
		}
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	want := halvingAnswers
	if row.answers != nil {
		want = *row.answers
	}
	got := answers{Dept: body.Answers.Dept.Probabilities, Choice: body.Answers.Dept.Choice, Confidence: body.Answers.Dept.Confidence, Urgent: body.Answers.Urgent.Noul}
	if !reflect.DeepEqual(got, want) || body.Model != fakeModel {
		t.Errorf("model %q, answers %+v; want %s, %+v", body.Model, got, fakeModel, want)
	}
	if w := r.header.Get("X-System1-Warnings"); w != row.warn {
		t.Errorf("X-System1-Warnings %q, want %q", w, row.warn)
	}
}

// question is the decide request of every gateway row: three options and
// a context.
const question = `{"question":"Which department should take this ticket?","options":["billing","technical","sales"],"context":{"ticket":"I was charged twice."}}`

// decided is a decided response's provider and probabilities (option
// order), as printed to 3 decimals by largest remainder; the decision is
// the first option and its confidence its probability.
type decided struct {
	provider string
	probs    []float64
}

var (
	// fallbackDecided is the fallback's Halving: 4/7, 2/7, 1/7 = .5714,
	// .2857, .1429; floors 571, 285, 142 leave two units, for the largest
	// remainders (.857 and .714).
	fallbackDecided = decided{"fallback", []float64{.571, .286, .143}}
	missingDecided  = decided{"primary", []float64{.667, .333, 0}}
	summedDecided   = decided{"primary", []float64{.5, .25, .25}}
)

// decideRow is one fault on the gateway's face: POST /v1/decide, and
// system1_decide over MCP where mcp is set.
//
// How to read a row. The fault is put behind the chain's first provider,
// "primary", for each target in `on`: an engine provider over one fleet
// node "bad" of that dialect, or a systemone provider whose endpoint is
// the faulty fake. Behind it is "fallback", an engine provider over a
// good llama.cpp node, or with `alone` "secondary", a second faulty
// provider of the same kind. The gateway's threshold is 0.4, so a good
// answer decides; fleet nodes have long timeouts, so the timeouts that
// fire are the gateway's own (per attempt, overall). The rest of the row is what must happen: the status
// (decided or error), the HTTP status of /v1/decide, error.code, the
// attempts as provider:outcome in order, words the first attempt's
// detail holds, the inference requests the faulty fake got, and for a
// decision its exact numbers (nil: fallbackDecided). An error must carry
// no decision, no confidence and no probabilities; an abstention no
// decision and no probabilities, graded escalate, its rationale giving
// the detail too. honour, again, late
// and hangUp are as on systemOneRow, with providers for nodes (an
// engine provider's pause is its node's).
type decideRow struct {
	name string
	on   []target
	bad  B

	timeout   time.Duration // the faulty providers' per-attempt timeout; 0 is long
	deadline  time.Duration // the gateway's overall deadline; 0 is 2*long
	maxLabels int           // the faulty node's max_labels (an openai node's top_logprobs)
	alone     bool          // every provider is faulty: no fallback

	status     string
	httpStatus int // of /v1/decide; 0 is 200
	code       string
	attempts   string
	detail     string
	badCalls   int
	decided    *decided

	honour, again, late, hangUp bool
	// mcp runs the row over MCP too, against the built binary.
	mcp bool
}

// decideRows is the gateway's fault matrix; decideRow says how to read a
// row.
var decideRows = []decideRow{
	{name: "refuses connections", on: everywhere, bad: B{Fault: fakeengine.Refuse},
		status: gateway.Decided, attempts: "primary:error fallback:ok", badCalls: 0, mcp: true},
	{name: "accepts and never answers: the attempt's timeout", on: everywhere, bad: B{Fault: fakeengine.Hang}, timeout: short,
		status: gateway.Decided, attempts: "primary:timeout fallback:ok", detail: "no answer within 2s", badCalls: 1, mcp: true},
	{name: "every provider hangs: the overall deadline", on: everywhere, bad: B{Fault: fakeengine.Hang}, alone: true, deadline: deadline,
		status: gateway.Failed, httpStatus: 504, code: gateway.CodeProviderTimeout, attempts: "primary:timeout secondary:skipped", detail: "overall deadline of 3s passed", badCalls: 1, mcp: true},
	{name: "500", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 500},
		status: gateway.Decided, attempts: "primary:error fallback:ok", detail: "500", badCalls: 1},
	{name: "502", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 502},
		status: gateway.Decided, attempts: "primary:error fallback:ok", detail: "502", badCalls: 1},
	{name: "503", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 503},
		status: gateway.Decided, attempts: "primary:error fallback:ok", detail: "503", badCalls: 1, mcp: true},
	{name: "429 with Retry-After: not asked again before it", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 429, RetryAfter: "30"},
		status: gateway.Decided, attempts: "primary:error fallback:ok", detail: "429", badCalls: 1, honour: true},
	{name: "429 with Retry-After: asked again once it has passed", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 429, RetryAfter: "1"},
		status: gateway.Decided, attempts: "primary:error fallback:ok", detail: "429", badCalls: 1, again: true},
	{name: "every provider 429", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 429, RetryAfter: "1"}, alone: true,
		status: gateway.Failed, httpStatus: 502, code: gateway.CodeProviderError, attempts: "primary:error secondary:error", detail: "429", badCalls: 1},
	{name: "body not JSON", on: everywhere, bad: B{Fault: fakeengine.NotJSON},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1, mcp: true},
	{name: "JSON without logprobs (System One: without answers)", on: everywhere, bad: B{Fault: fakeengine.NoLogprobs},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "logprobs null (System One: answers null)", on: everywhere, bad: B{Fault: fakeengine.NullLogprobs},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "logprob NaN, as Python writes it", on: everywhere, bad: B{Fault: fakeengine.NaN, Label: 1},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "logprob Infinity, as Python writes it", on: everywhere, bad: B{Fault: fakeengine.PosInf, Label: 1},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "logprob -Infinity, as Python writes it", on: everywhere, bad: B{Fault: fakeengine.NegInf, Label: 1},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "logprob null, as llama.cpp writes NaN and ±Inf", on: everywhere, bad: B{Fault: fakeengine.NullLogprob, Label: 1},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "logprob above 0 (System One: probability 1.5)", on: everywhere, bad: B{Fault: fakeengine.Positive, Label: 1},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "label missing from the top-k: answered, reported 0, flagged", on: []target{openai, ollama}, bad: B{Fault: fakeengine.MissingLabel, Label: 2},
		status: gateway.Decided, attempts: "primary:ok", detail: missingDetail, badCalls: 1, decided: &missingDecided},
	{name: "label missing from the top-k: answered, reported 0, flagged", on: []target{llamacpp}, bad: B{Fault: fakeengine.MissingLabel, Label: 2}, // asked again for the top 1024
		status: gateway.Decided, attempts: "primary:ok", detail: missingDetail, badCalls: 2, decided: &missingDecided},
	{name: "option missing from a System One reply", on: []target{systemOne}, bad: B{Fault: fakeengine.MissingLabel, Label: 2},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", detail: "probabilities: 2 keys for 3 options", badCalls: 1},
	{name: "duplicate label, llama.cpp: one token id twice", on: []target{llamacpp}, bad: B{Fault: fakeengine.DuplicateLabel, Label: 1},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", detail: "appears twice", badCalls: 1},
	{name: "duplicate label by text, the top-k then over 1", on: []target{openai, ollama}, bad: B{Fault: fakeengine.DuplicateLabel, Label: 1},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", detail: "> 1", badCalls: 1},
	{name: "duplicate label by text within 1: summed", on: []target{openai}, bad: B{Fault: fakeengine.DuplicateLabel, Label: 2}, maxLabels: 3,
		status: gateway.Decided, attempts: "primary:ok", badCalls: 1, decided: &summedDecided},
	{name: "empty choices (Ollama: empty logprobs; System One: empty answers)", on: everywhere, bad: B{Fault: fakeengine.EmptyChoices},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", badCalls: 1},
	{name: "stalls mid-body", on: everywhere, bad: B{Fault: fakeengine.Stall}, timeout: short,
		status: gateway.Decided, attempts: "primary:timeout fallback:ok", detail: "no answer within 2s", badCalls: 1},
	{name: "claims the model, then 404", on: everywhere, bad: B{Fault: fakeengine.Status, Status: 404},
		status: gateway.Decided, attempts: "primary:error fallback:ok", detail: "404", badCalls: 1},
	{name: "answers a choice outside the options", on: []target{systemOne}, bad: B{Fault: OutsideOptions},
		status: gateway.Decided, attempts: "primary:malformed fallback:ok", detail: `choice "refunds" is not one of the options`, badCalls: 1, mcp: true},
	// A model that ranks none of the options abstains, and the next
	// provider, which may rank them, is asked; where none does, the first
	// one's abstention is the answer.
	{name: "no label in the top-k", on: []target{openai, ollama}, bad: B{Logprobs: fakeengine.Probs()},
		status: gateway.Decided, attempts: "primary:abstained fallback:ok", detail: "no label has any probability", badCalls: 1},
	{name: "no label in the top-k", on: []target{llamacpp}, bad: B{Logprobs: fakeengine.Probs()}, // asked again for the top 1024
		status: gateway.Decided, attempts: "primary:abstained fallback:ok", detail: "no label has any probability", badCalls: 2},
	{name: "no label in the top-k of any provider", on: []target{openai, ollama}, bad: B{Logprobs: fakeengine.Probs()}, alone: true,
		status: gateway.Abstained, attempts: "primary:abstained secondary:abstained", detail: "no label has any probability", badCalls: 1, mcp: true},
	{name: "no label in the top-k of any provider", on: []target{llamacpp}, bad: B{Logprobs: fakeengine.Probs()}, alone: true,
		status: gateway.Abstained, attempts: "primary:abstained secondary:abstained", detail: "no label has any probability", badCalls: 2},
	{name: "every provider down", on: everywhere, bad: B{Fault: fakeengine.Refuse}, alone: true,
		status: gateway.Failed, httpStatus: 502, code: gateway.CodeProviderError, attempts: "primary:error secondary:error", badCalls: 0, mcp: true},
	{name: "every provider answers garbage", on: everywhere, bad: B{Fault: fakeengine.NotJSON}, alone: true,
		status: gateway.Failed, httpStatus: 502, code: gateway.CodeMalformed, attempts: "primary:malformed secondary:malformed", badCalls: 1},
	{name: "answers after the gateway gave up", on: everywhere, bad: B{Fault: Late}, timeout: brief,
		status: gateway.Decided, attempts: "primary:timeout fallback:ok", badCalls: 1, late: true},
	{name: "the caller hangs up while the provider holds the request", on: everywhere, bad: B{Fault: fakeengine.Hang},
		badCalls: 1, hangUp: true},
}

// TestDecideFaults runs the gateway's fault matrix over POST /v1/decide,
// and the rows marked mcp over system1_decide too.
func TestDecideFaults(t *testing.T) {
	for _, row := range decideRows {
		on := row.on
		if slices.Contains(on, systemOne) { // the same endpoint as a node, too
			on = append(slices.Clone(on), systemOneNode)
		}
		for _, tg := range on {
			t.Run(row.name+"/"+string(tg)+"/http", func(t *testing.T) {
				if !row.late && !row.hangUp {
					t.Parallel()
				}
				runDecideRow(t, row, tg)
			})
			if row.mcp {
				t.Run(row.name+"/"+string(tg)+"/mcp", func(t *testing.T) {
					t.Parallel()
					c := newChain(t, row, tg)
					var args map[string]any
					if err := json.Unmarshal([]byte(question), &args); err != nil {
						t.Fatal(err)
					}
					raw, isError := startMCP(t, c.cfg).decide(t, args)
					if isError != (row.status == gateway.Failed) {
						t.Errorf("isError %v for %s", isError, raw)
					}
					checkDecide(t, row, raw)
					if n := c.bad.calls(); n != row.badCalls {
						t.Errorf("the faulty provider's fake got %d inference requests, want %d", n, row.badCalls)
					}
				})
			}
		}
	}
}

// chain is a row's gateway configuration and the fakes behind it.
type chain struct {
	cfg      *config.Config
	fakes    []*node
	bad, end *node // end is the fallback's node, or nil
	// badNode is the fleet node of the faulty fake: a systemone provider
	// becomes a node of its own name.
	badNode string
}

func newChain(t *testing.T, row decideRow, tg target) *chain {
	t.Helper()
	c := &chain{badNode: "bad"}
	var nodes []config.Node
	provider := func(name string, n *node) config.Provider {
		p := config.Provider{Name: name, Kind: "engine", Model: n.cfg.Models[0], Timeout: config.Duration(or(row.timeout, long))}
		if n.target == systemOne {
			p.Kind, p.URL = "systemone", n.cfg.URL
		} else {
			nodes = append(nodes, n.cfg)
		}
		c.fakes = append(c.fakes, n)
		return p
	}
	if tg == systemOne {
		c.badNode = "primary"
	}
	c.bad = startNode(t, "bad", tg, row.bad, long, "fake")
	c.bad.cfg.MaxLabels = row.maxLabels
	providers := []config.Provider{provider("primary", c.bad)}
	if row.alone {
		providers = append(providers, provider("secondary", startNode(t, "bad2", tg, row.bad, long, "fake2")))
	} else {
		c.end = startNode(t, "good", llamacpp, B{}, long, "good")
		p := provider("fallback", c.end)
		p.Timeout = config.Duration(long)
		providers = append(providers, p)
	}
	threshold := 0.4
	c.cfg = &config.Config{
		Gateway:   config.Gateway{Threshold: &threshold, Timeout: config.Duration(long), Deadline: config.Duration(or(row.deadline, 2*long))},
		Providers: providers,
	}
	c.cfg.Nodes = nodes
	return c
}

func runDecideRow(t *testing.T, row decideRow, tg target) {
	base := runtime.NumGoroutine()
	c := newChain(t, row, tg)
	c.cfg.Normalize() // as config.Load does: systemone providers become nodes
	s := serve(t, c.fakes, c.cfg.Nodes, 4*long, func(r *fleet.Router) *gateway.Gateway {
		return gateway.New(gateway.Options{Config: c.cfg, Answer: answer.New(answer.Options{Router: r}), Version: "faults"})
	})

	if row.hangUp {
		hangUp(t, s, c.bad, "/v1/decide", question)
		noneLeft(t, s, base)
		if n := c.end.calls(); n != 0 {
			t.Errorf("the fallback was asked %d times after the caller hung up", n)
		}
		if !state(t, s.router, c.badNode).Healthy {
			t.Error("the node is cooling down for the caller's hang-up")
		}
		return
	}

	before := time.Now()
	r := s.mustPost(t, "/v1/decide", question)
	after := time.Now() // the pause began between before and after
	checkDecideHTTP(t, row, r)
	if n := c.bad.calls(); n != row.badCalls {
		t.Errorf("the faulty provider's fake got %d inference requests, want %d", n, row.badCalls)
	}
	if row.honour {
		res := checkDecideHTTP(t, row, s.mustPost(t, "/v1/decide", question))
		if n := c.bad.calls(); n != row.badCalls {
			t.Errorf("within the Retry-After the provider was asked again: %d requests, want %d", n, row.badCalls)
		}
		// Whatever the target, the pause is its node's, and the attempt
		// says the node is cooling down.
		pausedFor(t, row.bad, before, after, state(t, s.router, c.badNode).CoolUntil)
		if d := res.Attempts[0].Detail; !strings.Contains(d, "cooling down") {
			t.Errorf("within the Retry-After the attempt's detail %q does not say the node is cooling down", d)
		}
	}
	if row.again {
		time.Sleep(time.Until(after.Add(retryAfter(t, row.bad)))) // waiting out the pause is the point
		checkDecideHTTP(t, row, s.mustPost(t, "/v1/decide", question))
		if n := c.bad.calls(); n != row.badCalls+1 {
			t.Errorf("after the Retry-After the provider got %d requests, want %d", n, row.badCalls+1)
		}
	}
	if row.late {
		c.bad.release()
		c.bad.waitIdle(t)
		noneLeft(t, s, base)
	}
}

func checkDecideHTTP(t *testing.T, row decideRow, r reply) *gateway.Response {
	t.Helper()
	if want := cmp.Or(row.httpStatus, http.StatusOK); r.status != want {
		t.Errorf("HTTP status %d, want %d", r.status, want)
	}
	return checkDecide(t, row, r.body)
}

// checkDecide checks a decide response, from either face, against the
// row, and returns it.
func checkDecide(t *testing.T, row decideRow, raw []byte) *gateway.Response {
	t.Helper()
	var res gateway.Response
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	_ = json.Unmarshal(raw, &top)
	var outcomes []string
	for _, a := range res.Attempts {
		outcomes = append(outcomes, a.Provider+":"+a.Outcome)
	}
	if got := strings.Join(outcomes, " "); res.Status != row.status || got != row.attempts {
		t.Fatalf("status %s, attempts %q; want %s, %q\n%s", res.Status, got, row.status, row.attempts, raw)
	}
	if row.detail != "" && !strings.Contains(res.Attempts[0].Detail, row.detail) {
		t.Errorf("the first attempt's detail %q does not say %q", res.Attempts[0].Detail, row.detail)
	}
	if res.Status == gateway.Failed {
		_, p := top["probabilities"]
		_, c := top["confidence"]
		if p || c || string(top["decision"]) != "null" || string(top["provider"]) != "null" {
			t.Errorf("an error with numbers, a decision or a provider: %s", raw)
		}
		if res.Error == nil || res.Error.Code != row.code {
			t.Errorf("error %+v, want code %s", res.Error, row.code)
		}
		return &res
	}
	if res.Status == gateway.Abstained {
		_, p := top["probabilities"]
		if p || string(top["decision"]) != "null" || string(top["error"]) != "null" || res.Grade != gateway.GradeEscalate ||
			!strings.Contains(res.Rationale, row.detail) || !strings.Contains(res.Rationale, "Reason this through yourself") {
			t.Errorf("an abstention with numbers, a decision, an error, another grade or a rationale without %q: %s", row.detail, raw)
		}
		return &res
	}
	want := fallbackDecided
	if row.decided != nil {
		want = *row.decided
	}
	var got []float64
	var options []string
	for _, p := range res.Probabilities {
		got, options = append(got, p.P), append(options, p.Option)
	}
	if string(top["error"]) != "null" || res.Decision == nil || *res.Decision != "billing" || res.Provider == nil || *res.Provider != want.provider ||
		!slices.Equal(options, []string{"billing", "technical", "sales"}) || !slices.Equal(got, want.probs) ||
		res.Confidence == nil || *res.Confidence != want.probs[0] {
		t.Errorf("response %s; want billing decided by %s at %v", raw, want.provider, want.probs)
	}
	return &res
}

// hangUp posts body and hangs up once the node has the request; the
// caller must see an error, not a reply.
func hangUp(t *testing.T, s *system1, n *node, path, body string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		r   reply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.post(ctx, path, body)
		done <- result{r, err}
	}()
	n.arrived(t)
	cancel()
	if res := <-done; res.err == nil {
		t.Fatalf("the caller hung up, and still got %s", res.r)
	}
	n.waitIdle(t)
}

// pausedFor checks that a pause that began between from and to ends
// exactly the fault's Retry-After later.
func pausedFor(t *testing.T, b B, from, to, until time.Time) {
	t.Helper()
	ra := retryAfter(t, b)
	if until.Before(from.Add(ra)) || until.After(to.Add(ra)) {
		t.Errorf("paused until %s: not %s after the 429, which came between %s and %s", until, ra, from, to)
	}
}

// retryAfter is the pause a fault's Retry-After asks for.
func retryAfter(t *testing.T, b B) time.Duration {
	t.Helper()
	secs, err := strconv.Atoi(b.RetryAfter)
	if err != nil {
		t.Fatalf("Retry-After %q", b.RetryAfter)
	}
	return time.Duration(secs) * time.Second
}

func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
