package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/fakeengine"
)

// manyQuestions is a request of questions choices of options options each
// over state.
func manyQuestions(state string, questions, options int) string {
	qs := map[string]any{}
	for i := range questions {
		crit := map[string]any{}
		for j := range options {
			crit[fmt.Sprintf("option-%03d", j)] = nil
		}
		qs[fmt.Sprintf("q%02d", i)] = map[string]any{"type": "choice", "instructions": "Which one?", "criteria": crit}
	}
	b, _ := json.Marshal(map[string]any{"model": fakeengine.DefaultModel, "state": state, "questions": qs})
	return string(b)
}

// validationMessages are the messages of a 422's detail.
func validationMessages(t *testing.T, r reply) []string {
	t.Helper()
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("got %s, want 422", r)
	}
	var e struct {
		Detail []struct {
			Msg string `json:"msg"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	var out []string
	for _, d := range e.Detail {
		out = append(out, d.Msg)
	}
	return out
}

// A request whose engine calls would exceed the node's budget is a 422
// naming the budget and the request's cost, before any engine call; the
// largest request the default limits allow (1,000 questions) fits the
// default budget on a llama.cpp node, which reads any number of labels a
// call, and on a node reading 20 labels a call when each has at most 77
// options; the budget is the node's to set.
func TestEngineCallBudget(t *testing.T) {
	for _, tc := range []struct {
		name               string
		dialect            fakeengine.Dialect
		budget             int
		questions, options int
		cost               int // 0: admitted
	}{
		{"openai, 20 labels a call: 14 calls a question", fakeengine.OpenAI, 0, 300, 255, 4200},
		{"ollama, top 20: 14 calls a question", fakeengine.Ollama, 0, 300, 255, 4200},
		{"openai within the default budget: 1,000 questions of 77 options", fakeengine.OpenAI, 0, 1000, 77, 0},
		{"llamacpp: 1,000 questions, one call each", fakeengine.LlamaCpp, 0, 1000, 10, 0},
		{"a budget of the node's own", fakeengine.Ollama, 10, 11, 3, 11},
		{"within a budget of the node's own", fakeengine.Ollama, 10, 10, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "n", tc.dialect, fakeengine.Behavior{}, func(c *config.Node) { c.MaxEngineCalls = tc.budget })
			// Up to 4,000 engine calls: the budget admits them, however
			// long a loaded machine takes to make them.
			s := serve(t, setup{nodes: []node{n}, requestTimeout: 10 * time.Minute})
			r := s.ask(t, manyQuestions("a state", tc.questions, tc.options))
			if tc.cost == 0 {
				if r.status != http.StatusOK {
					t.Fatalf("got %s, want 200", r)
				}
				return
			}
			budget := tc.budget
			if budget == 0 {
				budget = config.DefaultMaxEngineCalls
			}
			msgs := validationMessages(t, r)
			if len(msgs) != tc.questions {
				t.Fatalf("%d problems for %d questions: %q", len(msgs), tc.questions, msgs)
			}
			for _, want := range []string{fmt.Sprintf("costs %d engine calls", tc.cost), fmt.Sprintf("budget of %d calls", budget), "max_engine_calls"} {
				if !strings.Contains(msgs[0], want) {
					t.Errorf("%q does not say %q", msgs[0], want)
				}
			}
			if got := len(n.fake.Inferences()); got != 0 {
				t.Errorf("%d engine calls were made for a request refused up front", got)
			}
		})
	}
}

// gate holds the engine calls whose prompt holds a marker until it is
// opened, and counts them as they arrive.
type gate struct {
	marker  []byte
	open    chan struct{}
	arrived chan struct{}
}

func (g *gate) proxy(t *testing.T, to string) string {
	target, _ := url.Parse(to)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, g.marker) {
			select {
			case g.arrived <- struct{}{}:
			default: // counted enough
			}
			<-g.open
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target.String()+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A big request neither starves another caller nor cools the node: while
// all of a 1,000-question request's calls that hold slots are stuck in the
// engine, a small request from another caller still gets its 200 (one
// request holds at most half a node's slots, so a slot is free for it);
// then the big one finishes with its 200 and the node is healthy.
func TestBigRequestLeavesRoomForOthers(t *testing.T) {
	const slots = 8
	g := &gate{marker: []byte("the big state"), open: make(chan struct{}), arrived: make(chan struct{}, 64)}
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{}, func(c *config.Node) {
		c.MaxInFlight, c.QueueTimeout = slots, config.Duration(200e6)
	})
	n.cfg.URL = g.proxy(t, n.fake.URL)
	s := serve(t, setup{nodes: []node{n}})

	var wg sync.WaitGroup
	var big reply
	wg.Go(func() { big = s.ask(t, manyQuestions("the big state", 1000, 3)) })
	for range slots / 2 { // the big request's share of the slots, all stuck
		<-g.arrived
	}
	small := s.ask(t, manyQuestions("a small state", 1, 3))
	close(g.open)
	wg.Wait()
	if small.status != http.StatusOK {
		t.Errorf("the small request, while the big one held its slots: %s", small)
	}
	if big.status != http.StatusOK {
		t.Errorf("the big request: %.300s", big)
	}
	if h := health(t, s)["n"]; !h.Healthy {
		t.Errorf("the node after the big request: %+v", h)
	}
}

// A request of 1,000 questions, the default cap, is answered in full
// through the HTTP face: every question has its answer, and every
// distribution sums to 1. One more is a 422 naming the cap, and the cap is
// the configuration's (max_questions).
func TestThousandQuestions(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	r := s.ask(t, manyQuestions("a state", 1000, 4))
	if r.status != http.StatusOK {
		t.Fatalf("got %.300s, want 200", r)
	}
	var out struct {
		Answers map[string]struct {
			Probabilities map[string]float64 `json:"probabilities"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Answers) != 1000 {
		t.Fatalf("%d answers for 1000 questions", len(out.Answers))
	}
	for i := range 1000 {
		id := fmt.Sprintf("q%02d", i)
		a, ok := out.Answers[id]
		d := a.Probabilities
		if !ok || len(d) != 4 {
			t.Fatalf("question %s: answer %v", id, d)
		}
		sum := 0.0
		for _, p := range d {
			sum += p
		}
		if math.Abs(sum-1) > 0.011 { // two decimals over four options
			t.Fatalf("question %s: %v sums to %v", id, d, sum)
		}
	}

	for _, tc := range []struct {
		max, ask int
		want     string
	}{
		{0, 1001, "1001 questions; at most 1000 are accepted"},
		{5, 6, "6 questions; at most 5 are accepted"},
	} {
		s := serve(t, setup{nodes: []node{n}, maxQuestions: tc.max})
		msgs := validationMessages(t, s.ask(t, manyQuestions("a state", tc.ask, 2)))
		if len(msgs) != 1 || msgs[0] != tc.want {
			t.Errorf("max_questions %d, %d asked: %q, want %q", tc.max, tc.ask, msgs, tc.want)
		}
	}
}

// The size limits of one question count what limits.md says they count:
// instructions as JSON (a string's quotes and escapes too), an option its
// name and its description as JSON; a refusal says so, so that a caller
// whose 16,384 bytes of text are refused as 16,386 bytes sees why.
func TestQuestionSizeLimitsSayWhatTheyCount(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	body := func(q string) string {
		return `{"model": "` + fakeengine.DefaultModel + `", "state": "x", "questions": {"q": ` + q + `}}`
	}
	for _, tc := range []struct {
		name, question string
		want           string // in the 422's message; "" is a 200
	}{
		{"instructions at the limit as JSON", `{"type": "noul", "instructions": "` + strings.Repeat("a", 16382) + `"}`, ""},
		{"instructions of 16 KiB of text", `{"type": "noul", "instructions": "` + strings.Repeat("a", 16384) + `"}`,
			"instructions are 16386 bytes as JSON; at most 16384 are accepted"},
		{"an option at the limit", `{"type": "choice", "criteria": {"b": "` + strings.Repeat("a", 4093) + `", "c": null}}`, ""},
		{"an option over it", `{"type": "choice", "criteria": {"b": "` + strings.Repeat("a", 4094) + `", "c": null}}`,
			"option is 4097 bytes, its name and its description as JSON; at most 4096 are accepted"},
	} {
		r := s.ask(t, body(tc.question))
		switch {
		case tc.want == "" && r.status != http.StatusOK:
			t.Errorf("%s: got %.300s, want 200", tc.name, r)
		case tc.want != "" && (r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), tc.want)):
			t.Errorf("%s: got %.300s, want a 422 saying %q", tc.name, r, tc.want)
		}
	}
}
