package fleet

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/metrics"
)

// lockedClock is a clock the probe's goroutine may read while a test
// moves it.
type lockedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *lockedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *lockedClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// probes counts the constraint probes among the requests the fake got.
func probes(f *fakeengine.Fake) int {
	n := 0
	for _, r := range f.Inferences() {
		if r.User == ConstraintProbe.User() {
			n++
		}
	}
	return n
}

// constrainedRouter is a router over one node of the fake engine, with
// the given dialect and constrain setting, on a clock the test moves.
func constrainedRouter(t *testing.T, dialect fakeengine.Dialect, constrain string, b fakeengine.Behavior) (*Router, *fakeengine.Fake, *lockedClock) {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: dialect, Behavior: b})
	t.Cleanup(f.Close)
	n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: string(dialect), Models: []string{fakeengine.DefaultModel},
		Constrain: constrain, Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{Policy: Policy{AllowedFails: 3, Window: time.Minute, Cooldown: 5 * time.Second}})
	c := &lockedClock{t: time.Unix(1e9, 0)}
	r.now = c.now
	return r, f, c
}

// ConstraintState reports what is known of the node's constraint, as its
// State does.
func (n *Node) ConstraintState() ConstraintState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.constraintLocked()
}

// settled waits for the node's constraint to leave unprobed, or for its
// probe to end without an answer.
func settled(t *testing.T, n *Node) ConstraintState {
	t.Helper()
	waitFor(t, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return !n.constraint.probing && (n.constraint.State != ConstraintUnprobed || !n.constraint.retryAt.IsZero())
	})
	return n.ConstraintState()
}

// Natural answers of the fake's "model": the labels of a question, and
// very little on the probe's Q and X, as a model asked for the colour of
// the sky puts on them.
var natural = fakeengine.ByLabel(map[string]float64{"A": 0.6, "B": 0.3, "Q": 0.001, "X": 0.001})

// A constrained node is probed once, at its first use, and health says
// whether it holds its constraint; an engine that has none to hold says
// so, and is never probed.
func TestConstraintProbe(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dialect   fakeengine.Dialect
		constrain string
		b         fakeengine.Behavior
		want      string
		probes    int
	}{
		{"structured outputs held", fakeengine.OpenAI, "structured_outputs", fakeengine.Behavior{Logprobs: natural}, ConstraintHolds, 1},
		{"guided choice held", fakeengine.OpenAI, "guided_choice", fakeengine.Behavior{Logprobs: natural}, ConstraintHolds, 1},
		{"structured outputs ignored", fakeengine.OpenAI, "structured_outputs", fakeengine.Behavior{Logprobs: natural, IgnoreConstraint: true}, ConstraintFailed, 1},
		{"guided choice ignored", fakeengine.OpenAI, "guided_choice", fakeengine.Behavior{Logprobs: natural, IgnoreConstraint: true}, ConstraintFailed, 1},
		{"openai without a constraint", fakeengine.OpenAI, "", fakeengine.Behavior{Logprobs: natural}, ConstraintNone, 0},
		{"llama.cpp", fakeengine.LlamaCpp, "", fakeengine.Behavior{Logprobs: natural}, ConstraintNone, 0},
		{"ollama", fakeengine.Ollama, "", fakeengine.Behavior{Logprobs: natural}, ConstraintNone, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, f, _ := constrainedRouter(t, tc.dialect, tc.constrain, tc.b)
			n := r.nodes[0]
			before := n.ConstraintState()
			if want := map[bool]string{true: ConstraintUnprobed, false: ConstraintNone}[tc.constrain != ""]; before.State != want || before.Method != tc.constrain {
				t.Fatalf("before any use: %+v, want %s", before, want)
			}
			for range 3 {
				// The answers hold their labels either way: only the probe
				// tells a constraint that is ignored.
				if a := decide(t, r, choiceRequest(fakeengine.DefaultModel, 2)); a.Err != nil || a.ConstraintFailed {
					t.Fatalf("answer: %+v", a)
				}
			}
			got := n.ConstraintState()
			if tc.probes > 0 {
				got = settled(t, n)
			}
			if got.State != tc.want || r.States()[0].Constraint != got {
				t.Errorf("constraint %+v (state %+v), want %s", got, r.States()[0].Constraint, tc.want)
			}
			if tc.probes > 0 && (got.Model != fakeengine.DefaultModel || got.At.IsZero() || got.Detail == "") {
				t.Errorf("the probe's result does not say what it learnt from: %+v", got)
			}
			for range 2 {
				decide(t, r, choiceRequest(fakeengine.DefaultModel, 2))
			}
			if n := probes(f); n != tc.probes {
				t.Errorf("%d probes sent, want %d", n, tc.probes)
			}
			for _, req := range f.Inferences() {
				if req.User == ConstraintProbe.User() && (req.MaxTokens != 1 || strings.Join(req.Labels, ",") != "Q,X" || !req.Constrained) {
					t.Errorf("the probe was sent as %+v", req)
				}
			}
		})
	}
}

// An answer whose generated token is no label proves the constraint is
// ignored even where the probe's natural answer happened to be a label.
func TestConstraintFailedInAnAnswer(t *testing.T) {
	// The "model" answers the probe with Q, and the question with neither
	// A nor B.
	lp := fakeengine.ByLabel(map[string]float64{"A": 0.05, "B": 0.04, "Q": 0.7, "X": 0.1})
	r, _, _ := constrainedRouter(t, fakeengine.OpenAI, "structured_outputs", fakeengine.Behavior{Logprobs: lp, IgnoreConstraint: true})
	n := r.nodes[0]
	a := decide(t, r, choiceRequest(fakeengine.DefaultModel, 2))
	if a.Err != nil || !a.ConstraintFailed {
		t.Fatalf("answer %+v: want one read as before a constraint that failed", a)
	}
	// Whichever ends last, the probe (which saw a label) cannot undo what
	// the answer proved.
	if got := settled(t, n); got.State != ConstraintFailed || !strings.Contains(got.Detail, "an answer") {
		t.Errorf("constraint %+v", got)
	}
}

// A probe that gets no answer (the node hangs) is bounded by the node's
// timeout, leaves the node unprobed and the caller's request unharmed by
// it, and is sent again only on a use after the cooldown; a node that
// went down is probed again when it comes back.
func TestConstraintProbeRetriesAndReprobes(t *testing.T) {
	r, f, clk := constrainedRouter(t, fakeengine.OpenAI, "structured_outputs", fakeengine.Behavior{Logprobs: natural})
	n := r.nodes[0]
	n.Timeout = 200 * time.Millisecond
	f.Set(fakeengine.Behavior{Fault: fakeengine.Hang})
	decide(t, r, choiceRequest(fakeengine.DefaultModel, 2)) // times out, as does the probe
	got := settled(t, n)
	if got.State != ConstraintUnprobed || !strings.Contains(got.Detail, "no answer") || !strings.Contains(got.Detail, "timeout") {
		t.Fatalf("after a hung probe: %+v", got)
	}
	// Nothing hangs from here on: the calls that must be answered get the
	// node's usual time, not the hung one's 200 ms, however busy the machine.
	n.Timeout = 5 * time.Second
	f.Set(fakeengine.Behavior{Logprobs: natural})
	if a := decide(t, r, choiceRequest(fakeengine.DefaultModel, 2)); a.Err != nil {
		t.Fatal(a.Err)
	}
	if p := probes(f); p != 1 {
		t.Fatalf("%d probes before the cooldown ended, want 1", p)
	}
	clk.advance(6 * time.Second)
	decide(t, r, choiceRequest(fakeengine.DefaultModel, 2))
	waitFor(t, func() bool { return n.ConstraintState().State == ConstraintHolds })
	if p := probes(f); p != 2 {
		t.Fatalf("%d probes, want 2", p)
	}

	// Down (a 503), then back: probed again, once.
	f.Set(fakeengine.Behavior{Fault: fakeengine.Status, Status: 503})
	decide(t, r, choiceRequest(fakeengine.DefaultModel, 2))
	if got := n.ConstraintState(); got.State != ConstraintUnprobed || !strings.Contains(got.Detail, "went down") {
		t.Fatalf("after the node went down: %+v", got)
	}
	f.Set(fakeengine.Behavior{Logprobs: natural, IgnoreConstraint: true}) // upgraded to a vLLM that ignores it
	clk.advance(6 * time.Second)
	decide(t, r, choiceRequest(fakeengine.DefaultModel, 2))
	if got := settled(t, n); got.State != ConstraintFailed {
		t.Fatalf("back after being down: %+v", got)
	}
	if p := probes(f); p != 3 {
		t.Errorf("%d probes, want 3", p)
	}
}

// The probe is sent after the calls of the request that first used the
// node, outside its deadline: the request is answered as if there were
// no probe, and a caller that gives up at once does not stop it.
func TestConstraintProbeAfterTheRequest(t *testing.T) {
	r, f, _ := constrainedRouter(t, fakeengine.OpenAI, "structured_outputs", fakeengine.Behavior{Logprobs: natural})
	ctx, cancel := context.WithCancel(context.Background())
	res, err := r.Decide(ctx, choiceRequest(fakeengine.DefaultModel, 2))
	cancel()
	if err != nil || res.Questions[0].Err != nil || len(res.Questions[0].Attempts) != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := settled(t, r.nodes[0]); got.State != ConstraintHolds {
		t.Errorf("constraint %+v", got)
	}
	reqs := f.Inferences()
	if len(reqs) != 2 || reqs[0].User == ConstraintProbe.User() || reqs[1].User != ConstraintProbe.User() {
		t.Errorf("the engine saw %d requests; want the question, then the probe", len(reqs))
	}
}

// The metric's state label takes exactly the states health reports.
func TestConstraintStatesMatchTheMetric(t *testing.T) {
	if !slices.Equal(metrics.ConstraintStates, ConstraintStates) {
		t.Errorf("metrics name %v, the fleet %v", metrics.ConstraintStates, ConstraintStates)
	}
}
