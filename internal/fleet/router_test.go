package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
)

// fakeEngine answers from a script: fail, when set, is returned instead of
// a reading; calls counts Read calls. Each read is one engine call
// (engine.Call), as in every dialect.
type fakeEngine struct {
	mu    sync.Mutex
	fail  error
	block bool // wait for the context to end
	calls int
}

func (f *fakeEngine) Read(ctx context.Context, model string, p engine.Prompt) (r engine.Reading, err error) {
	f.mu.Lock()
	f.calls++
	fail, block := f.fail, f.block
	f.mu.Unlock()
	err = engine.Call(ctx, func(ctx context.Context) error {
		if block {
			<-ctx.Done()
			return ctx.Err()
		}
		return fail
	})
	if err != nil {
		return engine.Reading{}, err
	}
	r = engine.Reading{Model: model + "-concrete", Counted: true, InputTokens: 10, OutputTokens: 1, PreMask: true}
	for i := range p.Labels {
		r.Logprobs = append(r.Logprobs, -float64(i+1)) // A is the most likely
		r.Found = append(r.Found, true)
	}
	return r, nil
}

func (f *fakeEngine) Models(ctx context.Context) ([]string, error) { return []string{"m"}, nil }

func (f *fakeEngine) Labels(ctx context.Context, model string, c []string, want int) ([]string, error) {
	return c[:min(want, len(c))], nil
}

func (f *fakeEngine) Caps() engine.Caps { return engine.Caps{PerCall: 20} }

func (f *fakeEngine) set(fail error, block bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.block = fail, block
}

func (f *fakeEngine) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// newTestRouter makes one node per option cap given.
func newTestRouter(labels ...int) (*Router, []*fakeEngine, *clock) {
	var nodes []*Node
	var fakes []*fakeEngine
	for i, l := range labels {
		f := &fakeEngine{}
		fakes = append(fakes, f)
		nodes = append(nodes, &Node{Name: string(rune('a' + i)), Backend: EngineBackend(f, false), MaxOptions: l, Timeout: time.Second, claimed: []string{"m"}})
	}
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	r := New(nodes, Options{Aliases: map[string]string{"jev-latest": "m"}})
	r.now = c.now
	return r, fakes, c
}

func choiceRequest(model string, options int) decision.Request {
	q := decision.Question{ID: "q", Kind: decision.Choice}
	for i := range options {
		k := string(rune('a' + i%26))
		if i >= 26 {
			k += string(rune('a' + i/26))
		}
		q.Options = append(q.Options, decision.Option{Key: k, Name: k})
	}
	return decision.Request{Model: model, State: json.RawMessage(`"s"`), Questions: []decision.Question{q}}
}

func decide(t *testing.T, r *Router, req decision.Request) Answered {
	t.Helper()
	res, err := r.Decide(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Questions[0]
}

func outcomes(a Answered) string {
	var s []string
	for _, at := range a.Attempts {
		s = append(s, at.Node+":"+at.Outcome)
	}
	return strings.Join(s, " ")
}

func TestFailoverAndCooldown(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      error
		block     bool
		wantKind  string
		coolsAt   int // failures before node a cools down
		retryWait time.Duration
	}{
		{"refused", &engine.Failure{Kind: engine.Unavailable, Err: errors.New("connection refused")}, false, "unavailable", 1, 0},
		{"404 ghost claim: the model cools on the node", engine.StatusFailure(404, 0, "model not found"), false, "unavailable", 1, 0},
		{"500", engine.StatusFailure(500, 0, "boom"), false, "unavailable", 1, 0},
		{"malformed", &engine.Failure{Kind: engine.Malformed, Err: errors.New("no logprobs")}, false, "malformed", 3, 0},
		{"timeout", nil, true, "timeout", 3, 0},
		{"429", engine.StatusFailure(429, 7*time.Second, "slow down"), false, "rate_limited", 1, 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, fakes, clk := newTestRouter(20, 20)
			r.nodes[0].Timeout = 20 * time.Millisecond
			fakes[0].set(tc.fail, tc.block)
			for i := 1; i <= tc.coolsAt; i++ {
				a := decide(t, r, choiceRequest("m", 3))
				if a.Err != nil || a.Node != "b" {
					t.Fatalf("try %d: answered by %q, err %v", i, a.Node, a.Err)
				}
				if got, want := outcomes(a), "a:"+tc.wantKind+" b:ok"; got != want {
					t.Fatalf("try %d: attempts %q, want %q", i, got, want)
				}
				_, resting := r.nodes[0].modelResting("m", clk.now())
				if healthy := r.nodes[0].State(clk.now()).Healthy && !resting; healthy != (i < tc.coolsAt) {
					t.Fatalf("after %d failures node a healthy=%v; it cools down at %d", i, healthy, tc.coolsAt)
				}
			}
			// Cooled down: not tried at all until the cooldown ends.
			calls := fakes[0].count()
			if a := decide(t, r, choiceRequest("m", 3)); outcomes(a) != "b:ok" {
				t.Fatalf("a cooling node was tried: %q", outcomes(a))
			}
			wait := max(tc.retryWait, DefaultPolicy.Cooldown)
			clk.advance(wait - time.Millisecond)
			decide(t, r, choiceRequest("m", 3))
			if fakes[0].count() != calls {
				t.Fatalf("node a was retried %v before its cooldown of %v ended", time.Millisecond, wait)
			}
			clk.advance(time.Millisecond)
			fakes[0].set(nil, false)
			if a := decide(t, r, choiceRequest("m", 3)); a.Node != "a" {
				t.Fatalf("after the cooldown node a should answer again; got %q (%s)", a.Node, outcomes(a))
			}
		})
	}
}

func TestRejectedIsNotRetriedElsewhere(t *testing.T) {
	r, fakes, clk := newTestRouter(20, 20)
	fakes[0].set(engine.StatusFailure(400, 0, "context too long"), false)
	a := decide(t, r, choiceRequest("m", 3))
	var f *engine.Failure
	if !errors.As(a.Err, &f) || f.Kind != engine.Rejected || !strings.Contains(a.Err.Error(), "context too long") {
		t.Fatalf("err %v, want the engine's rejection", a.Err)
	}
	if fakes[1].count() != 0 {
		t.Fatal("a rejected request was sent to another node")
	}
	if !r.nodes[0].State(clk.now()).Healthy {
		t.Fatal("a node that rejected a bad request was cooled down")
	}
}

func TestLabelCapacityPicksNodes(t *testing.T) {
	r, fakes, _ := newTestRouter(20, 40)
	if lim, err := r.Limits("m"); err != nil || lim.MaxChoiceOptions != 40 {
		t.Fatalf("limits %+v, %v; want the largest cap, 40", lim, err)
	}
	a := decide(t, r, choiceRequest("m", 30))
	if a.Err != nil || a.Node != "b" || fakes[0].count() != 0 {
		t.Fatalf("30 options: node %q err %v; only b takes that many", a.Node, a.Err)
	}
	if a.Rounds != 2 {
		t.Fatalf("30 options over 20 labels a call took %d rounds, want 2", a.Rounds)
	}
	a = decide(t, r, choiceRequest("m", 41))
	var f *engine.Failure
	if !errors.As(a.Err, &f) || f.Kind != engine.Rejected || !strings.Contains(a.Err.Error(), "option cap") {
		t.Fatalf("41 options: %v", a.Err)
	}
}

func TestModelsAndAliases(t *testing.T) {
	r, _, _ := newTestRouter(20)
	if _, err := r.Decide(context.Background(), choiceRequest("jev-1.13.0", 2)); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("a hosted model id was answered locally: %v", err)
	}
	if _, err := r.Limits("other"); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("unknown model: %v", err)
	}
	res, err := r.Decide(context.Background(), choiceRequest("jev-latest", 2))
	if err != nil || res.Model != "m-concrete" {
		t.Fatalf("alias: %+v, %v; want the engine's own model id", res, err)
	}
	d := res.Questions[0].Dist
	if want := 1 / (1 + math.Exp(-1)); math.Abs(d[0]-want) > 1e-12 {
		t.Fatalf("distribution %v, want p[a] = %v", d, want)
	}
}

func TestEveryNodeDown(t *testing.T) {
	r, fakes, _ := newTestRouter(20, 20)
	for _, f := range fakes {
		f.set(&engine.Failure{Kind: engine.Unavailable, Err: errors.New("refused")}, false)
	}
	res, err := r.Decide(context.Background(), choiceRequest("m", 2))
	if err != nil {
		t.Fatal(err)
	}
	a := res.Questions[0]
	if a.Err == nil || a.Dist != nil || outcomes(a) != "a:unavailable b:unavailable" {
		t.Fatalf("answered %v with %v after %q", a.Err, a.Dist, outcomes(a))
	}
	// Both cooling now: the error says so, and no node is called.
	a = decide(t, r, choiceRequest("m", 2))
	if a.Err == nil || !strings.Contains(a.Err.Error(), "cooling down") || len(a.Attempts) != 0 {
		t.Fatalf("err %v, attempts %q", a.Err, outcomes(a))
	}
}

func TestCallerDeadlineStopsFailover(t *testing.T) {
	r, fakes, _ := newTestRouter(20, 20)
	fakes[0].set(nil, true)
	fakes[1].set(nil, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	res, err := r.Decide(ctx, choiceRequest("m", 2))
	if err != nil {
		t.Fatal(err)
	}
	a := res.Questions[0]
	if !errors.Is(a.Err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the caller's deadline", a.Err)
	}
}

// A router over some nodes shares their state with the whole fleet and
// substitutes no aliases.
func TestOnly(t *testing.T) {
	r, fakes, _ := newTestRouter(20, 20)
	only := r.Only([]string{"b", "nobody"})
	if len(only.nodes) != 1 || only.nodes[0] != r.nodes[1] {
		t.Fatalf("nodes %v", only.nodes)
	}
	if _, err := only.Limits("jev-latest"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("an alias was substituted: %v", err)
	}
	if a := decide(t, only, choiceRequest("m", 3)); a.Err != nil || a.Node != "b" || fakes[0].count() != 0 {
		t.Errorf("answered by %q (%v), node a asked %d times", a.Node, a.Err, fakes[0].count())
	}
}

// A node whose key variable is named but unset is never asked: every
// call fails at once and says why.
func TestUnsetKeyIsNeverSent(t *testing.T) {
	n := &Node{Name: "k", Backend: unusable{errors.New("not asked: its key variable K is not set")}, MaxOptions: 20, Timeout: time.Second, claimed: []string{"m"}}
	r := New([]*Node{n}, Options{})
	if a := decide(t, r, choiceRequest("m", 2)); a.Err == nil || !strings.Contains(a.Err.Error(), "K is not set") {
		t.Fatalf("%+v", a)
	}
	if p := r.Ping(context.Background(), "m"); len(p) != 1 || p[0].Err == nil {
		t.Fatalf("ping %+v", p)
	}
}

// The catalog (GET /v1/models, decide's capabilities) lists the served
// models in node order, then the aliases by name, the same on every call,
// where the aliases came in a map's order, another on each call.
func TestCatalogOrderIsStable(t *testing.T) {
	n := &Node{Name: "n", Dialect: "ollama", Backend: EngineBackend(&fakeEngine{}, false), MaxOptions: 20, Timeout: time.Second, claimed: []string{"m2", "m1"}}
	aliases := map[string]string{}
	for _, a := range []string{"e", "b", "d", "a", "c", "f", "h", "g"} {
		aliases[a] = "m1"
	}
	r := New([]*Node{n}, Options{Aliases: aliases})
	want := []string{"m2", "m1", "a", "b", "c", "d", "e", "f", "g", "h"}
	for range 20 {
		var got []string
		for _, m := range r.Catalog() {
			got = append(got, m.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("catalog %v, want %v", got, want)
		}
	}
}

// max_options caps a choice's options (configuration.md, limits.md): a
// score's levels are read as any question's labels, whatever the cap.
func TestOptionCapIsAChoices(t *testing.T) {
	r, fakes, _ := newTestRouter(4)
	req := choiceRequest("m", 5)
	req.Questions[0].Kind = decision.Score
	if a := decide(t, r, req); a.Err != nil || a.Node != "a" || fakes[0].count() == 0 {
		t.Fatalf("a score of 5 levels on a node of max_options 4: node %q, err %v; want it answered", a.Node, a.Err)
	}
	if a := decide(t, r, choiceRequest("m", 5)); a.Err == nil || !strings.Contains(a.Err.Error(), "option cap") {
		t.Fatalf("a choice of 5 options on a node of max_options 4: %v; want it refused naming the cap", a.Err)
	}
}
