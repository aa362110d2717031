package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/engine"
	"system1/internal/fakeengine"
)

// slotsByState reads which server slots the engine was sent each state's
// questions on, and counts the priming tasks.
func slotsByState(t *testing.T, f *fakeengine.Fake) (map[string]map[int]bool, int) {
	t.Helper()
	out := map[string]map[int]bool{}
	primes := 0
	for _, r := range f.Requests() {
		if r.Path == "/completion" {
			primes++
			continue
		}
		if !r.Inference {
			continue
		}
		var body struct {
			IDSlot *int `json:"id_slot"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || body.IDSlot == nil {
			t.Fatalf("a question not pinned to a slot: %s", r.Body)
		}
		p, ok := fakeengine.ParsePrompt(r.User)
		if !ok {
			t.Fatalf("not a system1 prompt: %q", r.User)
		}
		if out[p.State] == nil {
			out[p.State] = map[int]bool{}
		}
		out[p.State][*body.IDSlot] = true
	}
	return out, primes
}

func llamaNode(t *testing.T, name string, slots int) (*Node, *fakeengine.Fake) {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: slots, Parallel: slots,
		Behavior: fakeengine.Behavior{Latency: 15 * time.Millisecond}})
	t.Cleanup(f.Close)
	n, err := NewNode(config.Node{Name: name, URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return n, f
}

// heldTogether answers as the fake does by default (Halving), holding the
// n inference calls after the first skip until all n are in the engine at
// once, so that a test of how many calls a router keeps in flight does
// not depend on the router sending them faster than the engine answers.
// A router that never sends n at once is let go after 10 s, and its peak
// falls short.
func heldTogether(n, skip int) func(fakeengine.Request) []float64 {
	var arrived atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(all) }) }
	return func(r fakeengine.Request) []float64 {
		switch i := arrived.Add(1); {
		case i <= int64(skip):
		case i == int64(skip+1):
			time.AfterFunc(10*time.Second, let)
			fallthrough
		default:
			if i >= int64(skip+n) {
				let()
			}
			<-all
		}
		return fakeengine.Halving(r.Labels)
	}
}

// Row-wise work keeps every slot busy and each state on one slot: many
// states asked at once, as a batch asks them, each hold a server slot of
// their own and ask their questions there one after another, with no
// priming task; all the slots run at once and never more; and the
// router's capacity for the model is the slots. The first calls are held
// until every slot runs one (heldTogether).
func TestThroughputHoldsASlotPerState(t *testing.T) {
	const slots, states, k = 4, 12, 3
	n, f := llamaNode(t, "llama", slots)
	f.Set(fakeengine.Behavior{Latency: 15 * time.Millisecond, Prompted: heldTogether(slots, 0)})
	r := New([]*Node{n}, Options{})
	ctx := engine.WithThroughput(context.Background())
	r.Refresh(ctx)
	if got := r.Capacity(ctx, fakeengine.DefaultModel, k); got != slots {
		t.Errorf("capacity %d, want the %d slots", got, slots)
	}
	var wg sync.WaitGroup
	for i := range states {
		wg.Go(func() {
			res, err := r.Decide(ctx, manyQuestions(fakeengine.DefaultModel, fmt.Sprintf("state %d", i), k))
			if err != nil {
				t.Error(err)
				return
			}
			for j, a := range res.Questions {
				if a.Err != nil {
					t.Errorf("state %d, question %d: %v", i, j, a.Err)
				}
			}
		})
	}
	wg.Wait()
	by, primes := slotsByState(t, f)
	if len(by) != states || primes != 0 {
		t.Errorf("%d states seen, %d priming tasks; want %d and none", len(by), primes, states)
	}
	for st, used := range by {
		if len(used) != 1 {
			t.Errorf("%s: its questions went to slots %v, not one", st, used)
		}
	}
	if got := f.PeakTasks(); got != slots {
		t.Errorf("the engine ran at most %d tasks at once, want all %d slots", got, slots)
	}
	if h := n.held(); h != 0 {
		t.Errorf("%d slots still held after every request ended", h)
	}
}

// A state waiting for a slot on the node its hash prefers goes to a node
// with a slot free instead: row-wise work spreads over the nodes by their
// free slots.
func TestThroughputGoesToAFreeNode(t *testing.T) {
	a, fa := llamaNode(t, "a", 2)
	b, fb := llamaNode(t, "b", 2)
	r := New([]*Node{a, b}, Options{})
	ctx := engine.WithThroughput(context.Background())
	r.Refresh(ctx)
	// The engines' slots are read by the first request to each.
	if got := r.Capacity(ctx, fakeengine.DefaultModel, 1); got != 4 {
		t.Fatalf("capacity %d, want 4", got)
	}
	fa.Set(fakeengine.Behavior{Latency: time.Hour})
	fb.Set(fakeengine.Behavior{Latency: time.Hour})
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { _, _ = r.Decide(hctx, manyQuestions(fakeengine.DefaultModel, fmt.Sprintf("state %d", i), 1)) })
		// Each state holds its slot before the next one is routed.
		deadline := time.Now().Add(10 * time.Second)
		for a.held()+b.held() < i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("%d slots held after %d states", a.held()+b.held(), i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if a.held() != 2 || b.held() != 2 {
		t.Errorf("slots held: %d on a, %d on b; want every slot of both", a.held(), b.held())
	}
	cancel()
	wg.Wait()
}

// Row-wise, a node that fails a state's first question (here hung past
// its timeout) is not sent the state's other questions: they go on to the
// next node at once, as a request's do. Before, each was asked in turn on
// the held slot, and the row waited the node's timeout once a question.
func TestThroughputStopsOnANodeThatFailed(t *testing.T) {
	bad := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 2, Behavior: fakeengine.Behavior{Fault: fakeengine.Hang}})
	t.Cleanup(bad.Close)
	a, err := NewNode(config.Node{Name: "a", URL: bad.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}, Timeout: config.Duration(500 * time.Millisecond)}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := llamaNode(t, "b", 2)
	b.Priority = 1
	r := New([]*Node{a, b}, Options{})
	start := time.Now()
	res, err := r.Decide(engine.WithThroughput(context.Background()), manyOptions("a state", 4, 3))
	answered(t, "decide", res, err)
	if n := len(bad.Inferences()); n != 1 {
		t.Errorf("the hung node was sent %d of the state's questions, want the first alone", n)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the row took %s to fail over from a node timing out at 500 ms", d.Round(time.Millisecond))
	}
}
