package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
)

// The question the recordings in testdata were made with: see
// testdata/README.md.
var question = decision.Question{
	ID:           "animal",
	Kind:         decision.Choice,
	Instructions: json.RawMessage(`"Which animal is in the story?"`),
	Options: []decision.Option{
		{Key: "dog", Name: "dog"},
		{Key: "cat", Name: "cat"},
		{Key: "bird", Name: "bird", Text: json.RawMessage(`"a small bird"`)},
	},
}

const state = `"Once upon a time, there was a little dog."`

func prompt(labels ...string) engine.Prompt {
	return engine.Layout(json.RawMessage(state), question, labels)
}

func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answer is what the fake Ollama answers.
type answer struct {
	status int
	header map[string]string
	body   string
}

// request is what the fake Ollama was last asked.
type request struct {
	method, path, auth string
	body               []byte
}

// fake serves r on every path.
func fake(t *testing.T, r answer) (url string, last func() request) {
	t.Helper()
	var (
		mu  sync.Mutex
		got request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		got = request{req.Method, req.URL.Path, req.Header.Get("Authorization"), b}
		mu.Unlock()
		for k, v := range r.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(r.status)
		io.WriteString(w, r.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() request {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// Values of testdata/chat.json's top_logprobs.
const (
	lpA = -2.810337543487549
	lpB = -3.0858798027038574
	lpC = -3.7652039527893066
)

func TestRead(t *testing.T) {
	ok := func(body string) answer { return answer{status: 200, body: body} }
	// entry is a reply whose first token's alternatives are tops.
	entry := func(tops string) answer {
		return ok(`{"model":"tiny","message":{"role":"assistant","content":"A"},"done":true,
			"logprobs":[{"token":"A","logprob":-0.5,"bytes":[65],"top_logprobs":[` + tops + `]}],
			"prompt_eval_count":12,"eval_count":1}`)
	}
	inf := math.Inf(-1)
	abc := []string{"A", "B", "C"}
	for _, tc := range []struct {
		name   string
		reply  answer
		labels []string
		want   engine.Reading
		kind   engine.FailureKind // when want is zero
		retry  time.Duration
	}{
		{
			name:   "recorded",
			reply:  ok(recorded(t, "chat.json")),
			labels: []string{"A", "B", "C"},
			want: engine.Reading{Logprobs: []float64{lpA, lpB, lpC}, Found: []bool{true, true, true},
				PreMask: true, Model: "tiny", InputTokens: 190, OutputTokens: 1, Counted: true},
		},
		{
			// Z is in the vocabulary but not among the recorded top 20.
			name:   "label outside the top 20",
			reply:  ok(recorded(t, "chat.json")),
			labels: []string{"A", "B", "Z"},
			want: engine.Reading{Logprobs: []float64{lpA, lpB, inf}, Found: []bool{true, true, false},
				PreMask: true, Model: "tiny", InputTokens: 190, OutputTokens: 1, Counted: true},
		},
		{
			name:   "duplicate text summed",
			reply:  entry(`{"token":"A","logprob":-1.3862943611198906},{"token":"A","logprob":-1.3862943611198906},{"token":"B","logprob":-2}`),
			labels: []string{"A", "B", "C"},
			want: engine.Reading{Logprobs: []float64{math.Log(0.5), -2, inf}, Found: []bool{true, true, false},
				PreMask: true, Model: "tiny", InputTokens: 12, OutputTokens: 1, Counted: true},
		},
		{
			name:   "no usage",
			reply:  ok(`{"model":"tiny","logprobs":[{"token":"A","logprob":-1,"top_logprobs":[{"token":"A","logprob":-1}]}]}`),
			labels: []string{"A", "B", "C"},
			want:   engine.Reading{Logprobs: []float64{-1, inf, inf}, Found: []bool{true, false, false}, PreMask: true, Model: "tiny"},
		},
		{
			// Ollama omits a count of 0 (omitempty): one sent is no count
			// of the prompt, which no prompt of a question is, and usage
			// is estimated as for a reply without counts.
			name:   "a prompt of 0 tokens",
			reply:  ok(`{"model":"tiny","logprobs":[{"token":"A","logprob":-1,"top_logprobs":[{"token":"A","logprob":-1}]}],"prompt_eval_count":0,"eval_count":1}`),
			labels: []string{"A", "B", "C"},
			want:   engine.Reading{Logprobs: []float64{-1, inf, inf}, Found: []bool{true, false, false}, PreMask: true, Model: "tiny"},
		},
		{name: "null logprob", reply: entry(`{"token":"A","logprob":null},{"token":"B","logprob":-2}`), labels: abc, kind: engine.Malformed},
		{name: "top-k above 1", reply: entry(`{"token":"A","logprob":-0.1},{"token":"B","logprob":-0.2}`), labels: abc, kind: engine.Malformed},
		{name: "no logprobs", reply: ok(`{"model":"tiny","message":{"role":"assistant","content":"A"},"done":true}`), labels: abc, kind: engine.Malformed},
		{
			// The model ended its reply at once: Ollama sends no logprobs
			// for an end-of-sequence token. That is a reading that ranks
			// no label (the question fails alone), not a malformed reply
			// (which counts against the node, cooling it for every caller).
			name:   "ended at once",
			reply:  ok(`{"model":"tiny","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":12,"eval_count":1}`),
			labels: abc,
			want: engine.Reading{Logprobs: []float64{inf, inf, inf}, Found: []bool{false, false, false},
				PreMask: true, Model: "tiny", InputTokens: 12, OutputTokens: 1, Counted: true},
		},
		{name: "not JSON", reply: ok(`<html>gateway</html>`), labels: abc, kind: engine.Malformed},
		{name: "recorded 404", reply: answer{status: 404, body: recorded(t, "notfound.json")}, labels: abc, kind: engine.Unavailable},
		{name: "recorded 400", reply: answer{status: 400, body: recorded(t, "toplogprobs21.json")}, labels: abc, kind: engine.Rejected},
		{name: "429", reply: answer{status: 429, header: map[string]string{"Retry-After": "2"}, body: `{"error":"slow down"}`}, labels: abc, kind: engine.RateLimited, retry: 2 * time.Second},
		{name: "500", reply: answer{status: 500, body: `{"error":"llama runner process has terminated"}`}, labels: abc, kind: engine.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := fake(t, tc.reply)
			e := &Engine{BaseURL: url}
			got, err := e.Read(context.Background(), "tiny", prompt(tc.labels...))
			if tc.want.Logprobs == nil {
				checkFailure(t, err, tc.kind, tc.retry)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !sameReading(got, tc.want) {
				t.Errorf("reading\n%+v, want\n%+v", got, tc.want)
			}
		})
	}
}

// sameReading compares readings, logprobs to within rounding.
func sameReading(a, b engine.Reading) bool {
	if len(a.Logprobs) != len(b.Logprobs) {
		return false
	}
	for i := range a.Logprobs {
		if a.Logprobs[i] != b.Logprobs[i] && !(math.Abs(a.Logprobs[i]-b.Logprobs[i]) < 1e-12) {
			return false
		}
	}
	a.Logprobs, b.Logprobs = nil, nil
	return reflect.DeepEqual(a, b)
}

func checkFailure(t *testing.T, err error, kind engine.FailureKind, retry time.Duration) {
	t.Helper()
	var f *engine.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error %v (%T), want an *engine.Failure", err, err)
	}
	if f.Kind != kind || f.RetryAfter != retry {
		t.Errorf("failure %v (retry after %v), want %v (retry after %v)", f, f.RetryAfter, kind, retry)
	}
}

func TestReadUnreachable(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := (&Engine{BaseURL: srv.URL}).Read(context.Background(), "tiny", prompt("A", "B", "C"))
		checkFailure(t, err, engine.Unavailable, 0)
	})
	t.Run("no answer in time", func(t *testing.T) {
		// The server notices the client leaving only once it has read the
		// body; done releases the handler even if it does not.
		done := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-done:
			}
		}))
		defer srv.Close()
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := (&Engine{BaseURL: srv.URL}).Read(ctx, "tiny", prompt("A", "B", "C"))
		checkFailure(t, err, engine.Timeout, 0)
	})
}

// The engine sends what the real Ollama was sent for the recording, with
// the key as a bearer token.
func TestReadRequest(t *testing.T) {
	url, got := fake(t, answer{status: 200, body: recorded(t, "chat.json")})
	e := &Engine{BaseURL: url + "/", Key: "k3y"}
	p := prompt("A", "B", "C")
	if _, err := e.Read(context.Background(), "tiny", p); err != nil {
		t.Fatal(err)
	}
	req := got()
	if req.method != http.MethodPost || req.path != "/api/chat" {
		t.Errorf("%s %s, want POST /api/chat", req.method, req.path)
	}
	if req.auth != "Bearer k3y" {
		t.Errorf("Authorization %q", req.auth)
	}
	body := req.body
	var sent chatRequest
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Think || sent.Stream || !sent.Logprobs || sent.TopLogprobs != 20 ||
		sent.Options.Temperature != 0 || sent.Options.NumPredict != 1 || sent.Model != "tiny" {
		t.Errorf("request %s", body)
	}
	// Every field is sent, false and 0 included: Ollama's defaults
	// differ (thinking on for thinking models, temperature 0.8).
	var fields map[string]any
	json.Unmarshal(body, &fields)
	opts, _ := fields["options"].(map[string]any)
	for _, present := range []bool{fields["think"] != nil, fields["stream"] != nil, opts["temperature"] != nil} {
		if !present {
			t.Errorf("request %s leaves a field to Ollama's default", body)
		}
	}
	if _, ok := fields["format"]; ok {
		t.Errorf("request %s has a format, which makes the first token a quote", body)
	}
	if len(sent.Messages) != 2 || sent.Messages[0].Role != "system" || sent.Messages[1].Role != "user" ||
		sent.Messages[0].Content != p.System || !strings.HasPrefix(sent.Messages[1].Content, p.StatePart) {
		t.Errorf("messages %+v: want the system prompt, then the user turn starting with the state", sent.Messages)
	}
	var want any
	if err := json.Unmarshal([]byte(recorded(t, "request.json")), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(any(fields), want) {
		t.Errorf("request\n%s\ndiffers from testdata/request.json", body)
	}
}

// The recorded reply makes a distribution in the core, with the mass
// Ollama left on the labels.
func TestAsk(t *testing.T) {
	url, _ := fake(t, answer{status: 200, body: recorded(t, "chat.json")})
	out, err := engine.Ask(context.Background(), &Engine{BaseURL: url}, "tiny", json.RawMessage(state), question)
	if err != nil {
		t.Fatal(err)
	}
	mass := math.Exp(lpA) + math.Exp(lpB) + math.Exp(lpC)
	for i, lp := range []float64{lpA, lpB, lpC} {
		if want := math.Exp(lp) / mass; math.Abs(out.Dist[i]-want) > 1e-12 {
			t.Errorf("p[%d] = %v, want %v", i, out.Dist[i], want)
		}
	}
	if math.Abs(out.Mass-mass) > 1e-12 || len(out.Missing) > 0 || out.Estimated || out.Model != "tiny" {
		t.Errorf("outcome %+v", out)
	}
}

func TestModels(t *testing.T) {
	url, got := fake(t, answer{status: 200, body: recorded(t, "tags.json")})
	names, err := (&Engine{BaseURL: url}).Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names, []string{"tiny:latest"}) {
		t.Errorf("models %q", names)
	}
	if req := got(); req.method != http.MethodGet || req.path != "/api/tags" {
		t.Errorf("%s %s, want GET /api/tags", req.method, req.path)
	}

	url, _ = fake(t, answer{status: 500, body: `{"error":"boom"}`})
	_, err = (&Engine{BaseURL: url}).Models(context.Background())
	checkFailure(t, err, engine.Unavailable, 0)
}

func TestLabels(t *testing.T) {
	cand := []string{"A", "AB", "b", "7", "C", "D"}
	for _, tc := range []struct {
		want int
		keep []string
	}{
		{3, []string{"A", "7", "C"}},
		{9, []string{"A", "7", "C", "D"}},
	} {
		got, err := (&Engine{}).Labels(context.Background(), "tiny", cand, tc.want)
		if err != nil || !reflect.DeepEqual(got, tc.keep) {
			t.Errorf("%d labels of %q: %q, %v; want %q", tc.want, cand, got, err, tc.keep)
		}
	}
}

func TestCaps(t *testing.T) {
	if c := (&Engine{}).Caps(); c != (engine.Caps{PerCall: 20}) {
		t.Errorf("caps %+v: Ollama reads 20 labels a call and cannot hold a call to a subset", c)
	}
}
