package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/fakeengine"
)

// The batch estimate of a signature is the mean of the answers before
// the one it corrects, equally weighted up to the window, then decaying;
// a change of the option count starts it afresh.
func TestBatchPriorEstimate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window int
		stream []decision.Distribution
		want   decision.Distribution // the estimate returned for the last answer
		seen   int
	}{
		{"the first answer has no prior", 8, []decision.Distribution{{0.8, 0.2}}, nil, 0},
		{"the mean leaves the current answer out", 8, []decision.Distribution{{0.8, 0.2}, {0.6, 0.4}, {0.1, 0.9}}, decision.Distribution{0.7, 0.3}, 2},
		{"three options", 8, []decision.Distribution{{0.6, 0.3, 0.1}, {0.2, 0.3, 0.5}, {1, 0, 0}}, decision.Distribution{0.4, 0.3, 0.3}, 2},
		{"past the window old answers decay", 2, []decision.Distribution{{1, 0}, {0, 1}, {0, 1}, {0.5, 0.5}}, decision.Distribution{0.25, 0.75}, 3},
		{"a window of one is the last answer", 1, []decision.Distribution{{0.9, 0.1}, {0.3, 0.7}, {0.5, 0.5}}, decision.Distribution{0.3, 0.7}, 2},
		{"another option count starts afresh", 8, []decision.Distribution{{0.5, 0.5}, {0.2, 0.3, 0.5}}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBatchPrior(tc.window, 10)
			var est decision.Distribution
			var seen int
			for _, d := range tc.stream {
				est, seen = b.observe("sig", d)
			}
			if seen != tc.seen || len(est) != len(tc.want) {
				t.Fatalf("estimate %v after %d; want %v after %d", est, seen, tc.want, tc.seen)
			}
			for i := range est {
				if math.Abs(est[i]-tc.want[i]) > 1e-12 {
					t.Fatalf("estimate %v; want %v", est, tc.want)
				}
			}
		})
	}
}

// The estimates kept are bounded: past the cap the least recently used
// signature is dropped and starts afresh when it comes back.
func TestBatchPriorEvictsLeastRecentlyUsed(t *testing.T) {
	b := newBatchPrior(8, 2)
	d := decision.Distribution{0.5, 0.5}
	for _, sig := range []string{"a", "b", "a", "c"} { // b is the least recent when c comes
		b.observe(sig, d)
	}
	if n := b.sigs.Len(); n != 2 {
		t.Fatalf("%d signatures kept, cap 2", n)
	}
	if _, seen := b.observe("a", d); seen != 2 {
		t.Errorf("a was used lately, yet has seen %d answers, not 2", seen)
	}
	if _, seen := b.observe("b", d); seen != 0 {
		t.Errorf("b was the least recently used, yet kept %d answers", seen)
	}
	// Hostile callers inventing signatures hold the memory at the cap.
	for i := range 1000 {
		b.observe(fmt.Sprint("hostile", i), d)
	}
	if n := b.sigs.Len(); n != 2 {
		t.Fatalf("%d signatures kept after 1000 new ones, cap 2", n)
	}
}

// Concurrent answers of one signature are all counted (run with -race).
func TestBatchPriorConcurrent(t *testing.T) {
	b := newBatchPrior(1000, 4)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				b.observe("sig", decision.Distribution{0.25, 0.75})
			}
		})
	}
	wg.Wait()
	est, seen := b.observe("sig", decision.Distribution{0.25, 0.75})
	if seen != 400 || math.Abs(est[0]-0.25) > 1e-12 {
		t.Fatalf("%v after %d answers, want 0.25 after 400", est, seen)
	}
}

// Whatever distributions arrive, in any window, the estimate stays a
// distribution and counts every answer.
func FuzzBatchPrior(f *testing.F) {
	f.Add(uint8(3), uint8(2), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(1), uint8(4), []byte{0, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, window, options uint8, data []byte) {
		n := int(options%6) + 2
		b := newBatchPrior(int(window), 3)
		for k := 0; len(data) >= n; k++ {
			d := make(decision.Distribution, n)
			sum := 0.0
			for i := range d {
				d[i] = float64(data[i]) + 1
				sum += d[i]
			}
			for i := range d {
				d[i] /= sum
			}
			data = data[n:]
			est, seen := b.observe("sig", d)
			if seen != k {
				t.Fatalf("answer %d: seen %d", k, seen)
			}
			if k == 0 {
				if est != nil {
					t.Fatalf("a prior before any answer: %v", est)
				}
				continue
			}
			total := 0.0
			for _, p := range est {
				if !(p >= 0 && p <= 1) {
					t.Fatalf("estimate %v", est)
				}
				total += p
			}
			if math.Abs(total-1) > 1e-9 {
				t.Fatalf("estimate %v sums to %v", est, total)
			}
		}
	})
}

// priorRouter is a router over one fake llama.cpp node answering by
// leaning, with its engine for asking the same questions directly.
func priorRouter(t *testing.T, p Prior) (*Router, *fakeengine.Fake, engine.Engine) {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Behavior: fakeengine.Behavior{Prompted: fakeengine.Leaning}})
	t.Cleanup(f.Close)
	e := &llamacpp.Engine{BaseURL: f.URL}
	n := &Node{Name: "n", Dialect: "llamacpp", Backend: EngineBackend(e, false), MaxOptions: 20, Timeout: 10 * time.Second, claimed: []string{"m"}}
	r := New([]*Node{n}, Options{Prior: p})
	return r, f, e
}

func colourQuestion(opts ...string) decision.Question {
	q := decision.Question{ID: "q", Kind: decision.Choice, Instructions: json.RawMessage(`"Which colour?"`)}
	for _, o := range opts {
		q.Options = append(q.Options, decision.Option{Key: o, Name: o})
	}
	return q
}

// The content-free reading is one extra engine call over the empty
// state, made once per model and question (options included) and then
// cached within the configured bound; the call counts in the engine-call
// budget only when it is not cached, and a request over the budget only
// because of it is refused up front with what to change.
func TestContentFreeIsCachedAndBudgeted(t *testing.T) {
	r, f, _ := priorRouter(t, Prior{Mode: decision.PriorContentFree, Signatures: 1})
	r.nodes[0].MaxEngineCalls = 1
	req := decision.Request{Model: "m", State: json.RawMessage(`"about red"`), Questions: []decision.Question{colourQuestion("red", "green", "blue")}}
	res, err := r.Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var fl *engine.Failure
	if !errors.As(res.Questions[0].Err, &fl) || fl.Kind != engine.Rejected || !strings.Contains(fl.Error(), "costs 2 engine calls") ||
		!strings.Contains(fl.Error(), "1 of them for the content-free reading") || !strings.Contains(fl.Error(), "prior off or batch") {
		t.Fatalf("over budget by the content-free call: %v", res.Questions[0].Err)
	}
	if n := len(f.Inferences()); n != 0 {
		t.Fatalf("%d calls for a request refused up front", n)
	}
	for _, tc := range []struct {
		name          string
		q             decision.Question
		budget, calls int
	}{
		{"first ask: the answer and the content-free reading", colourQuestion("red", "green", "blue"), 2, 2},
		{"again: the reading is cached, so a budget of one call is enough", colourQuestion("red", "green", "blue"), 1, 1},
		{"other option texts are another question", colourQuestion("red", "green", "teal"), 2, 2},
		{"the cache holds one: the first question was evicted", colourQuestion("red", "green", "blue"), 2, 2},
	} {
		f.Reset()
		r.nodes[0].MaxEngineCalls = tc.budget
		req.Questions[0] = tc.q
		a := decide(t, r, req)
		infs := f.Inferences()
		if a.Err != nil || len(infs) != tc.calls || a.PriorVersion != decision.ContentFreeVersion {
			t.Fatalf("%s: %v, %d calls (want %d), prior %q", tc.name, a.Err, len(infs), tc.calls, a.PriorVersion)
		}
		if tc.calls == 2 && !strings.HasPrefix(infs[1].User, "State:\n\n\n") {
			t.Errorf("%s: the extra call's prompt %q is not over the empty state", tc.name, infs[1].User)
		}
	}
}

// Batch calibration is not applied, and not named, before the minimum;
// every answer counts toward the estimate, whatever its request asked,
// so a request asking for batch finds it warm.
func TestBatchWarmsOnEveryAnswer(t *testing.T) {
	r, _, _ := priorRouter(t, Prior{MinRequests: 2})
	req := decision.Request{Model: "m", State: json.RawMessage(`"about red"`), Questions: []decision.Question{colourQuestion("red", "green")}}
	for k := range 2 {
		if a := decide(t, r, req); a.Prior != nil {
			t.Fatalf("request %d asked for no prior, got %q", k, a.PriorVersion)
		}
	}
	req.Prior = decision.PriorBatch
	a := decide(t, r, req)
	if a.PriorVersion != "batch/n=2/window=256" {
		t.Fatalf("after two answers: prior %q", a.PriorVersion)
	}
	// Another instruction is another signature, not yet warm.
	req.Questions[0].Instructions = json.RawMessage(`"Which one?"`)
	if a := decide(t, r, req); a.Prior != nil {
		t.Fatalf("a new signature's first answer was corrected: %q", a.PriorVersion)
	}
}

// The content-free key covers everything the reading depends on.
func TestContentFreeKey(t *testing.T) {
	base := colourQuestion("red", "green")
	key := contentFreeKey("m", base, 1)
	other := func(f func(q *decision.Question)) decision.Question {
		q := base
		q.Options = slices.Clone(base.Options)
		f(&q)
		return q
	}
	for name, k := range map[string]string{
		"model":        contentFreeKey("m2", base, 1),
		"orders":       contentFreeKey("m", base, 2),
		"instructions": contentFreeKey("m", other(func(q *decision.Question) { q.Instructions = json.RawMessage(`"Which?"`) }), 1),
		"kind":         contentFreeKey("m", other(func(q *decision.Question) { q.Kind = decision.Score }), 1),
		"option text":  contentFreeKey("m", other(func(q *decision.Question) { q.Options[1].Text = json.RawMessage(`"leafy"`) }), 1),
		"option name":  contentFreeKey("m", other(func(q *decision.Question) { q.Options[1].Name = "greener" }), 1),
		"option split": contentFreeKey("m", other(func(q *decision.Question) {
			q.Options[0].Key, q.Options[0].Name = "redg", "redg"
			q.Options[1].Key = "reen"
		}), 1),
	} {
		if k == key {
			t.Errorf("another %s, the same key", name)
		}
	}
	if contentFreeKey("m", colourQuestion("red", "green"), 1) != key {
		t.Error("the same question, another key")
	}
}

// A System One upstream answers as it answers: content_free makes no
// extra call there and names no step, and its answers still join the
// batch estimate, which then applies to them.
func TestPriorOnUpstream(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Write([]byte(`{"model":"jev-1","answers":{"q":{"type":"choice","choice":"a","confidence":0.6,"probabilities":{"a":0.6,"b":0.3,"c":0.1}}},"usage":{"input_tokens":1,"output_tokens":1}}`))
	}))
	t.Cleanup(srv.Close)
	up, err := NewNode(config.Node{Name: "up", URL: srv.URL, Dialect: "systemone", Models: []string{"m"}}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{up}, Options{Prior: Prior{MinRequests: 1}})
	req := choiceRequest("m", 3)
	req.Prior = decision.PriorContentFree
	if a := decide(t, r, req); a.Err != nil || a.Prior != nil || calls.Load() != 1 {
		t.Fatalf("content_free on an upstream: %v, prior %q, %d calls", a.Err, a.PriorVersion, calls.Load())
	}
	req.Prior = decision.PriorBatch
	if a := decide(t, r, req); a.Err != nil || a.PriorVersion != "batch/n=1/window=256" {
		t.Fatalf("batch on an upstream: %v, prior %q", a.Err, a.PriorVersion)
	}
}
