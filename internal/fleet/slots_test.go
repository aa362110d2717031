package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
)

// manyOptions is a request of k choices of n options each over state.
func manyOptions(state string, k, n int) decision.Request {
	req := decision.Request{Model: fakeengine.DefaultModel, State: json.RawMessage(fmt.Sprintf("%q", state))}
	for i := range k {
		q := decision.Question{ID: fmt.Sprintf("q%d", i), Kind: decision.Choice,
			Instructions: json.RawMessage(fmt.Sprintf(`"question %d?"`, i))}
		for j := range n {
			key := fmt.Sprintf("o%03d", j)
			q.Options = append(q.Options, decision.Option{Key: key, Name: key})
		}
		req.Questions = append(req.Questions, q)
	}
	return req
}

// slotRouter is a router over one node of a fake engine started with opt,
// configured by c (its name, URL and dialect filled in).
func slotRouter(t *testing.T, opt fakeengine.Options, c config.Node) (*Router, *fakeengine.Fake) {
	t.Helper()
	f := fakeengine.New(opt)
	t.Cleanup(f.Close)
	c.Name, c.URL, c.Dialect = "n", f.URL, string(opt.Dialect)
	n, err := NewNode(c, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{})
	r.Refresh(context.Background())
	return r, f
}

// answered fails the test unless every question of res was answered.
func answered(t *testing.T, what string, res *Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, a := range res.Questions {
		if a.Err != nil {
			t.Fatalf("%s: question %d: %v", what, i, a.Err)
		}
	}
}

// Every engine call holds one of the node's slots while it runs: the
// rounds of a many-option question, each order of a debiased one, and
// llama.cpp's priming tasks. Two requests at once over a node with
// max_inflight 2 never have more than two calls at the engine, as the
// fake counts them, whatever the calls one question makes.
func TestEveryEngineCallHoldsASlot(t *testing.T) {
	const maxInflight = 2
	unpinned := false
	for _, tc := range []struct {
		name      string
		dialect   fakeengine.Dialect
		node      config.Node
		questions int
		options   int
		orders    int // debias orders; 0 is none
		rounds    int // engine calls of one question's order
	}{
		{"openai rounds", fakeengine.OpenAI, config.Node{}, 1, 255, 0, 14},
		{"openai rounds and orders", fakeengine.OpenAI, config.Node{}, 1, 255, 3, 14},
		{"ollama rounds", fakeengine.Ollama, config.Node{}, 1, 255, 0, 14},
		{"llamacpp unpinned rounds", fakeengine.LlamaCpp, config.Node{MaxLabels: 3, PinSlots: &unpinned}, 1, 26, 0, 13},
		{"llamacpp spread primes", fakeengine.LlamaCpp, config.Node{}, 4, 2, 0, 1},
		{"llamacpp spread primes and orders", fakeengine.LlamaCpp, config.Node{}, 4, 6, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.node.MaxInFlight = maxInflight
			// Every route is slow, llama.cpp's priming tasks too, so that
			// calls sent together are at the engine together.
			r, f := slotRouter(t, fakeengine.Options{Dialect: tc.dialect, Slots: 4, Behavior: fakeengine.Behavior{Latency: 10 * time.Millisecond, Everywhere: true}}, tc.node)
			r.debias = Debias{Permute: tc.orders > 0, Orders: tc.orders}
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() {
					res, err := r.Decide(context.Background(), manyOptions(fmt.Sprint("state ", i), tc.questions, tc.options))
					answered(t, tc.name, res, err)
					for _, a := range res.Questions {
						if want := tc.rounds * max(tc.orders, 1); a.Rounds != want {
							t.Errorf("%d options: %d engine calls, want %d", tc.options, a.Rounds, want)
						}
					}
				})
			}
			wg.Wait()
			if got := f.PeakTasks(); got > maxInflight {
				t.Errorf("the engine had %d calls at once from a node with max_inflight %d", got, maxInflight)
			}
		})
	}
}

// A big request beside small callers on a slow engine that runs two calls
// at once, behind a node with max_inflight 2: the big request's one
// 255-option question costs 64 calls of five labels each. Each call holds
// a slot, so the engine never has more than the node allows, every call
// ends well within the node's timeout, and neither the big request nor
// any small caller fails or cools the node. Before, the question held one
// slot and sent its rounds at once: the small callers' calls queued in the
// engine behind them and timed out, the node cooled, and the next small
// caller found no node.
func TestBigRequestBesideSmallCallers(t *testing.T) {
	const latency, small = 25 * time.Millisecond, 3
	r, f := slotRouter(t, fakeengine.Options{Dialect: fakeengine.OpenAI, Parallel: 2, Behavior: fakeengine.Behavior{Latency: latency}},
		config.Node{MaxLabels: 5, MaxInFlight: 2, Timeout: config.Duration(20 * latency)})
	ctx := context.Background()

	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	asked, failed := 0, []string{}
	for i := range small {
		wg.Go(func() {
			for {
				res, err := r.Decide(ctx, manyOptions(fmt.Sprint("small state ", i), 1, 3))
				mu.Lock()
				asked++
				if err != nil {
					failed = append(failed, err.Error())
				} else if a := res.Questions[0]; a.Err != nil {
					failed = append(failed, a.Err.Error())
				}
				mu.Unlock()
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	res, err := r.Decide(ctx, manyOptions("the big state", 1, 255))
	close(done)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d small requests failed beside the big one, the first: %s", len(failed), asked, failed[0])
	}
	answered(t, "the big request", res, err)
	if got := res.Questions[0].Rounds; got != 64 {
		t.Errorf("the big question took %d engine calls, want 64", got)
	}
	if s := r.States()[0]; !s.Healthy {
		t.Errorf("the node cooled: %s", s.CoolReason)
	}
	if got := f.PeakTasks(); got > 2 {
		t.Errorf("the engine had %d calls at once from a node with max_inflight 2", got)
	}
}

// The node's timeout bounds each engine call, not a question: a question
// whose calls go one after another (an engine that runs one at a time,
// max_inflight 1) and together take several timeouts is answered, each
// call well within it.
func TestTimeoutBoundsEachCall(t *testing.T) {
	const latency = 30 * time.Millisecond
	const timeout = 20 * latency
	for _, tc := range []struct {
		name    string
		dialect fakeengine.Dialect
		labels  int
		options int
		orders  int
		calls   int
	}{
		{"openai rounds", fakeengine.OpenAI, 10, 255, 0, 29},
		{"openai orders", fakeengine.OpenAI, 30, 24, 24, 24},
		{"llamacpp pinned rounds", fakeengine.LlamaCpp, 2, 26, 0, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, f := slotRouter(t, fakeengine.Options{Dialect: tc.dialect, Slots: 1, Parallel: 1, Behavior: fakeengine.Behavior{Latency: latency}},
				config.Node{MaxLabels: tc.labels, MaxInFlight: 1, Timeout: config.Duration(timeout)})
			r.debias = Debias{Permute: tc.orders > 0, Orders: tc.orders}
			began := time.Now()
			res, err := r.Decide(context.Background(), manyOptions("a state", 1, tc.options))
			took := time.Since(began)
			answered(t, tc.name, res, err)
			if got := res.Questions[0].Rounds; got != tc.calls {
				t.Errorf("%d engine calls, want %d", got, tc.calls)
			}
			// One call at a time, each a latency: the question took
			// longer than the timeout, which is the point.
			if took < time.Duration(tc.calls)*latency || took <= timeout {
				t.Errorf("the question took %s, not the %d calls' %s one after another", took, tc.calls, time.Duration(tc.calls)*latency)
			}
			if got := f.PeakTasks(); got != 1 {
				t.Errorf("the engine had %d calls at once, want 1", got)
			}
		})
	}
}

// A call that waits for a slot past queue_timeout, in the middle of a
// question's rounds, fails the question as busy, and waiting is not the
// node's failure: after more busy questions than the policy allows
// failures, the node is still healthy.
func TestWaitingForASlotIsNotAFailure(t *testing.T) {
	const latency = 20 * time.Millisecond
	r, _ := slotRouter(t, fakeengine.Options{Dialect: fakeengine.OpenAI, Behavior: fakeengine.Behavior{Latency: latency}},
		config.Node{MaxInFlight: 1, QueueTimeout: config.Duration(latency / 4)})
	n := r.nodes[0]
	for i := range DefaultPolicy.AllowedFails + 1 {
		// Wait for the node's one slot while the question's first call
		// holds it: the queue is first come, first served, so the slot
		// goes here before the question's next call, which waits past
		// queue_timeout and is busy.
		asked, held := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(held)
			for in, _ := n.slots.load(); in != 1; in, _ = n.slots.load() {
				select {
				case <-asked:
					return
				case <-time.After(time.Millisecond):
				}
			}
			n.slots.sem <- struct{}{}
			<-asked
			<-n.slots.sem
		}()
		a := decide(t, r, manyOptions(fmt.Sprint("state ", i), 1, 255))
		close(asked)
		<-held
		if outcomes(a) != "n:busy" {
			t.Fatalf("question %d: %q (%v), want busy", i, outcomes(a), a.Err)
		}
		if s := n.State(time.Now()); !s.Healthy {
			t.Fatalf("after %d busy questions the node cooled: %s", i+1, s.CoolReason)
		}
	}
}

// A llama-server's /props that claims more slots than any server runs (a
// proxy's or a broken build's total_slots) is not taken as its slots: the
// node answers as one that does not say them, bounded by max_inflight,
// where the gateway made a bound per claimed slot and died out of memory.
func TestClaimOfEndlessSlotsIsNotBelieved(t *testing.T) {
	for _, slots := range []int{1 << 40, 1 << 62} {
		t.Run(fmt.Sprint(slots), func(t *testing.T) {
			r, _ := slotRouter(t, fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: slots}, config.Node{MaxInFlight: 8})
			res, err := r.Decide(context.Background(), manyOptions("a state", 2, 3))
			answered(t, "decide", res, err)
			if s := r.States()[0].Slots; s != 8 {
				t.Errorf("the node's slots are %d, want its max_inflight, 8", s)
			}
			if c := r.Capacity(context.Background(), fakeengine.DefaultModel, 2); c != 8 {
				t.Errorf("capacity %d, want 8", c)
			}
		})
	}
}

// A caller that gave up while the node was asked its slots says nothing
// of the node: the next caller reads them, where before the node was
// taken for one that does not say its slots for a minute, its calls
// neither pinned nor bounded one per server slot, and /health showing
// its max_inflight.
func TestSlotsReadGivenUpOnIsReadAgain(t *testing.T) {
	r, _ := slotRouter(t, fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 2}, config.Node{MaxInFlight: 8})
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	r.Capacity(gone, fakeengine.DefaultModel, 1)
	if c := r.Capacity(context.Background(), fakeengine.DefaultModel, 1); c != 2 {
		t.Errorf("capacity %d after a caller gave up on the slots' read, want the server's 2 slots", c)
	}
	if s := r.States()[0].Slots; s != 2 {
		t.Errorf("the node's slots are %d after a caller gave up on their read, want the server's 2", s)
	}
}

// A caller waiting for another's read of the node's slots waits no longer
// than its own deadline: on a server that hangs, it had waited for the
// other's read to end, up to the node's timeout.
func TestSlotsReadWaitsNoLongerThanTheCaller(t *testing.T) {
	r, _ := slotRouter(t, fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 2,
		Behavior: fakeengine.Behavior{Fault: fakeengine.Hang, Everywhere: true}}, config.Node{MaxInFlight: 8, Timeout: config.Duration(5 * time.Second), Models: []string{fakeengine.DefaultModel}})
	first := make(chan struct{})
	go func() {
		defer close(first)
		r.Capacity(context.Background(), fakeengine.DefaultModel, 1) // hangs the node's timeout
	}()
	time.Sleep(100 * time.Millisecond) // the first read is out
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	r.Capacity(ctx, fakeengine.DefaultModel, 1)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a caller with 200 ms left waited %s for another's read of the slots", d.Round(time.Millisecond))
	}
	<-first
}
