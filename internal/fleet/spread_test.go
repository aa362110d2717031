package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
	"system1/internal/testengine"
)

// manyQuestions is a request of k yes/no questions over one state.
func manyQuestions(model, state string, k int) decision.Request {
	req := decision.Request{Model: model, State: json.RawMessage(fmt.Sprintf("%q", state))}
	for i := range k {
		req.Questions = append(req.Questions, decision.Question{ID: fmt.Sprintf("q%d", i), Kind: decision.Noul,
			Instructions: json.RawMessage(fmt.Sprintf(`"question %d?"`, i)), Options: decision.NoulOptions(nil, nil)})
	}
	return req
}

// calls is what the engine saw, in order: "slot N" for a question pinned
// to slot N, "prime N" for a priming task pinned to slot N ("prime" when
// unpinned).
func calls(t *testing.T, f *fakeengine.Fake) []string {
	t.Helper()
	var out []string
	for _, r := range f.Requests() {
		name := "slot"
		switch {
		case r.Inference:
		case r.Path == "/completion":
			name = "prime"
		default:
			continue
		}
		var body struct {
			IDSlot *int `json:"id_slot"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		switch {
		case body.IDSlot != nil:
			out = append(out, fmt.Sprintf("%s %d", name, *body.IDSlot))
		case r.Inference:
			out = append(out, "unpinned")
		default:
			out = append(out, name)
		}
	}
	return out
}

// A pinned llama.cpp node spreads a state's questions: over a new state
// the first goes alone to the state's slot, a priming task pinned to each
// slot the others go to follows, then the rest go at once to the slots
// after it; over a state seen just before, the priming tasks come first
// and every question goes at once. With spread_slots false they all go to
// the state's slot, and nothing is primed.
func TestSpreadSlots(t *testing.T) {
	for _, spread := range []bool{true, false} {
		t.Run(fmt.Sprint("spread=", spread), func(t *testing.T) {
			f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 4})
			defer f.Close()
			n, err := NewNode(config.Node{Name: "llama", URL: f.URL, Dialect: "llamacpp", SpreadSlots: &spread}, func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			r := New([]*Node{n}, Options{})
			ctx := context.Background()
			r.Refresh(ctx)
			req := manyQuestions(fakeengine.DefaultModel, "a state", 3)
			for round, want := range []string{"cold", "warm"} {
				f.Reset()
				res, err := r.Decide(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				for i, a := range res.Questions {
					if a.Err != nil {
						t.Fatalf("%s: question %d: %v", want, i, a.Err)
					}
				}
				got := calls(t, f)
				if len(got) == 0 {
					t.Fatalf("%s: no calls", want)
				}
				// The state's slot is its prefix's hash modulo the slots.
				first := int(engine.StatePrefix(req.State) % 4)
				seen := map[string]bool{}
				for _, c := range got {
					seen[c] = true
				}
				slot := func(i int) string { return fmt.Sprintf("slot %d", (first+i)%4) }
				switch {
				case !spread:
					if len(got) != 3 || len(seen) != 1 || !seen[slot(0)] {
						t.Fatalf("%s: calls %v, want every question on one slot and no priming", want, got)
					}
				case round == 0:
					if len(got) != 5 || got[0] != slot(0) || !primed(got[1:3], slot) || !seen[slot(1)] || !seen[slot(2)] {
						t.Fatalf("cold: calls %v, want %s, then slots %d and %d primed, then %s and %s", got, slot(0), (first+1)%4, (first+2)%4, slot(1), slot(2))
					}
				default:
					if len(got) != 5 || !primed(got[:2], slot) || !seen[slot(0)] || !seen[slot(1)] || !seen[slot(2)] {
						t.Fatalf("warm: calls %v, want slots %d and %d primed, then three slots", got, (first+1)%4, (first+2)%4)
					}
				}
			}
		})
	}
}

// primed reports whether calls are the priming tasks of the two slots
// after the state's, in either order.
func primed(calls []string, slot func(int) string) bool {
	want := map[string]bool{"prime " + strings.TrimPrefix(slot(1), "slot "): true, "prime " + strings.TrimPrefix(slot(2), "slot "): true}
	for _, c := range calls {
		if !want[c] {
			return false
		}
		delete(want, c)
	}
	return len(want) == 0
}

// On a llama-server just started, whose slots have never been used, a
// request's questions spread over slots still prefill the state once:
// each slot a question goes to is primed first, since llama-server loads
// no cached prefix into a slot that never held a prompt. Unprimed, each
// question but the first prefilled the state again on its own slot.
func TestRealEngineSpreadPrefillsTheStateOnce(t *testing.T) {
	const k = 4
	s := testengine.Start(t, k)
	n, err := NewNode(config.Node{Name: "real", URL: s.URL, Dialect: "llamacpp"}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{})
	ctx := context.Background()
	r.Refresh(ctx)
	story := func(name string) string {
		return strings.Repeat("Once upon a time "+name+" found a red ball in the park and played with it all day. ", 12)
	}
	evaluated := func(req decision.Request) int {
		before := s.PromptTokens(t)
		res, err := r.Decide(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range res.Questions {
			if a.Err != nil {
				t.Fatalf("question %d: %v", i, a.Err)
			}
		}
		return s.PromptTokens(t) - before
	}
	spread := evaluated(manyQuestions(testengine.Model, story("Lily"), k))
	one := evaluated(manyQuestions(testengine.Model, story("Ben"), 1))
	t.Logf("%d questions over a new state: %d prompt tokens evaluated; one question over another: %d", k, spread, one)
	// Prefilled once, the state costs about what one question does (1.8
	// times here, with the other questions' own tokens); prefilled on
	// every slot, about k times (3.9 with the priming unpinned).
	if float64(spread) >= 2.5*float64(one) {
		t.Errorf("%d questions evaluated %d prompt tokens, %.1f times one question's %d: the state was prefilled more than once", k, spread, float64(spread)/float64(one), one)
	}
}

// A llama.cpp node is sent at most one task per server slot at a time,
// however many questions a request holds (the rest wait in system1):
// llama-server has only its slots plus four HTTP threads, and a
// connection beyond them waits for a kept-alive one to time out. Without
// spreading, every question is pinned to the state's slot, so they go
// one at a time. Spread, the calls after the state's first question
// (asked alone, to prefill its slot) are held until both slots run one
// (heldTogether).
func TestLlamaCppTasksAtMostOnePerSlot(t *testing.T) {
	for _, spread := range []bool{true, false} {
		t.Run(fmt.Sprint("spread=", spread), func(t *testing.T) {
			want := 1
			if spread {
				want = 2
			}
			f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 2, Behavior: fakeengine.Behavior{Latency: 20 * time.Millisecond, Prompted: heldTogether(want, 1)}})
			defer f.Close()
			n, err := NewNode(config.Node{Name: "llama", URL: f.URL, Dialect: "llamacpp", SpreadSlots: &spread}, func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			r := New([]*Node{n}, Options{})
			ctx := context.Background()
			r.Refresh(ctx)
			res, err := r.Decide(ctx, manyQuestions(fakeengine.DefaultModel, "a state", 12))
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range res.Questions {
				if a.Err != nil {
					t.Fatalf("question %d: %v", i, a.Err)
				}
			}
			if got := f.PeakTasks(); got != want {
				t.Errorf("the engine ran at most %d tasks at once, want %d (2 slots, spread %v)", got, want, spread)
			}
		})
	}
}

// A node that hangs on a warm state's priming tasks is not sent the
// state's questions: they fail over at once, where each waited the node's
// timeout again after the primes had, and a request with less than twice
// the node's timeout left failed rather than fail over.
func TestSpreadHungPrimeFailsOverAtOnce(t *testing.T) {
	const timeout = time.Second
	bad := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 4})
	t.Cleanup(bad.Close)
	a, err := NewNode(config.Node{Name: "a", URL: bad.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}, Timeout: config.Duration(timeout)}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := llamaNode(t, "b", 2)
	b.Priority = 1
	r := New([]*Node{a, b}, Options{})
	res, err := r.Decide(context.Background(), manyOptions("a state", 3, 3))
	answered(t, "the first request", res, err)
	bad.Set(fakeengine.Behavior{Fault: fakeengine.Hang, Everywhere: true}) // wedged: even the primes hang
	sent := len(bad.Inferences())
	start := time.Now()
	res, err = r.Decide(context.Background(), manyOptions("a state", 3, 3))
	answered(t, "the request over the warm state", res, err)
	if d := time.Since(start); d > timeout*19/10 {
		t.Errorf("the request took %s to fail over from a node timing out at %s", d.Round(time.Millisecond), timeout)
	}
	if n := len(bad.Inferences()) - sent; n != 0 {
		t.Errorf("the node that hung on the primes was sent %d questions", n)
	}
	for _, q := range res.Questions {
		if got := outcomes(q); got != "a:timeout b:ok" {
			t.Errorf("attempts %q, want a:timeout b:ok", got)
		}
	}
}
