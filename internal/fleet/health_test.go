package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/engine"
)

// A ping is a probe: what it finds is the node's state, which every view
// reads. A node found down is cooled at once, with why, and counted; one
// found up again ends the cooldown its probe began.
func TestPingIsTheNodesState(t *testing.T) {
	var down atomic.Bool
	srv := modelList(t, &down)
	n, err := NewNode(config.Node{Name: "n", URL: srv.URL, Dialect: "systemone", Models: []string{"m"}}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{})
	down.Store(true)
	p := r.Ping(context.Background(), "m")
	s := n.State(r.now())
	if len(p) != 1 || p[0].Err == nil || p[0].Healthy || s.Healthy || s.Cooldowns != 1 || !strings.Contains(s.CoolReason, "health probe") || p[0].CoolReason != s.CoolReason {
		t.Fatalf("a ping that found the node down: %+v; state %+v", p, s)
	}
	if want := "unavailable (HTTP 503): health probe: down"; !strings.HasPrefix(s.CoolReason, want) {
		t.Errorf("cool reason %q, want it to start %q: the probe's failure said once", s.CoolReason, want)
	}
	down.Store(false)
	p = r.Ping(context.Background(), "m")
	if s := n.State(r.now()); len(p) != 1 || p[0].Err != nil || !p[0].Healthy || !s.Healthy || s.Cooldowns != 1 {
		t.Fatalf("a ping that found the node up again: %+v; state %+v", p, s)
	}
}

func TestFleetStatus(t *testing.T) {
	for _, tc := range []struct {
		healthy []bool
		want    string
	}{
		{nil, FleetDown},
		{[]bool{false}, FleetDown},
		{[]bool{true}, FleetOK},
		{[]bool{true, true, true}, FleetOK},
		{[]bool{true, false, true}, FleetDegraded},
		{[]bool{false, false}, FleetDown},
	} {
		states := make([]State, len(tc.healthy))
		for i, h := range tc.healthy {
			states[i].Healthy = h
		}
		if got := FleetStatus(states); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.healthy, got, tc.want)
		}
	}
}

// A node's counts say what befell it: each failed call, each time the
// questions it failed moved on, each cooldown; a node that answered has
// none.
func TestNodeCounts(t *testing.T) {
	r, fakes, _ := newTestRouter(20, 20)
	fakes[0].set(&engine.Failure{Kind: engine.Unavailable, Err: errors.New("connection refused")}, false)
	a := decide(t, r, choiceRequest("m", 3)) // state "s" goes to a first (TestFailoverAndCooldown)
	if a.Err != nil || a.Node != "b" || outcomes(a) != "a:unavailable b:ok" {
		t.Fatalf("%+v", a)
	}
	st := r.States()
	if got := [3]int64{st[0].Errors, st[0].Failovers, st[0].Cooldowns}; got != [3]int64{1, 1, 1} {
		t.Errorf("the failed node's errors, failovers, cooldowns: %v", got)
	}
	if got := [3]int64{st[1].Errors, st[1].Failovers, st[1].Cooldowns}; got != [3]int64{} {
		t.Errorf("the node that answered: %v", got)
	}
}

// modelList is a System One endpoint listing the model m, or answering
// 503 while down is set.
func modelList(t *testing.T, down *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"models":[{"name":"m","description":"","release_date":"2026-01-01"}]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// listEngine is a fakeEngine whose model list fails while down is set.
type listEngine struct {
	fakeEngine
	down, limited atomic.Bool
}

func (e *listEngine) Models(ctx context.Context) ([]string, error) {
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case e.down.Load():
		return nil, &engine.Failure{Kind: engine.Unavailable, Err: errors.New("connection refused")}
	case e.limited.Load():
		return nil, engine.StatusFailure(429, time.Minute, "slow down")
	}
	return []string{"m"}, nil
}

// A probe answered 429 rests the node as long as its Retry-After asks,
// as a request's 429 does, and a good probe after it does not end that
// rest; before, the probe's 429 was read as down, a 5 s cooldown.
func TestProbeTakesA429sRest(t *testing.T) {
	e := &listEngine{}
	n := &Node{Name: "n", Backend: EngineBackend(e, false), MaxOptions: 20, Timeout: time.Second, claimed: []string{"m"}}
	r := New([]*Node{n}, Options{})
	clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	r.now = clk.now
	e.limited.Store(true)
	r.Probe(context.Background())
	limitedAt := clk.now()
	e.limited.Store(false)
	clk.advance(10 * time.Second)
	r.Probe(context.Background())
	if s := n.State(clk.now()); s.Healthy || !s.CoolUntil.Equal(limitedAt.Add(time.Minute)) {
		t.Fatalf("%s after a probe's 429 asking a minute's rest: healthy %v, cooling until %s (%s)", clk.now().Sub(limitedAt), s.Healthy, s.CoolUntil, s.CoolReason)
	}
	if want := "rate_limited (HTTP 429): health probe: slow down"; n.State(clk.now()).CoolReason != want {
		t.Errorf("cool reason %q, want %q", n.State(clk.now()).CoolReason, want)
	}
}

// A probe that finds a node up again ends only the cooldown a probe
// began: a 429's Retry-After is kept to, whether a probe failed before
// the 429 or while its cooldown ran, where a good probe after a failed
// one ended any cooldown.
func TestGoodProbeEndsOnlyAProbesCooldown(t *testing.T) {
	limited := engine.StatusFailure(429, time.Minute, "slow down")
	for _, tc := range []struct {
		name  string
		steps []string // "probe down", "probe up", "429", each 5 s after the last
	}{
		{"a probe failed during the 429's rest", []string{"429", "probe down", "probe up"}},
		{"a probe failed before the 429", []string{"probe down", "wait", "429", "probe up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &listEngine{}
			n := &Node{Name: "n", Backend: EngineBackend(e, false), MaxOptions: 20, Timeout: time.Second, claimed: []string{"m"}}
			r := New([]*Node{n}, Options{})
			clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
			r.now = clk.now
			var limitedAt time.Time
			for _, step := range tc.steps {
				clk.advance(5 * time.Second)
				switch step {
				case "probe down", "probe up":
					e.down.Store(step == "probe down")
					r.Probe(context.Background())
				case "429":
					e.set(limited, false)
					decide(t, r, choiceRequest("m", 3))
					e.set(nil, false)
					limitedAt = clk.now()
				}
			}
			if s := n.State(clk.now()); s.Healthy || !s.CoolUntil.Equal(limitedAt.Add(time.Minute)) {
				t.Fatalf("%s after a 429 asking a minute's rest: healthy %v, cooling until %s (%s)", clk.now().Sub(limitedAt), s.Healthy, s.CoolUntil, s.CoolReason)
			}
		})
	}
}

// A model list the caller gave up on says nothing about a node whose
// models are listed, not configured: /health keeps its last list and
// shows no error, where it showed the caller's "context canceled".
func TestListGivenUpOnIsNotTheNodes(t *testing.T) {
	e := &listEngine{}
	n := &Node{Name: "n", Backend: EngineBackend(e, false), MaxOptions: 20, Timeout: time.Second}
	r := New([]*Node{n}, Options{})
	r.Probe(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Probe(ctx)
	r.Refresh(ctx)
	if s := n.State(time.Now()); s.Error != "" || !slices.Equal(s.Models, []string{"m"}) {
		t.Fatalf("after lists given up on: error %q, models %v", s.Error, s.Models)
	}
}

// pullEngine lists the models in models, which a test may add to (a
// model pulled while the gateway runs), and counts the lists.
type pullEngine struct {
	fakeEngine
	mu     sync.Mutex
	models []string
	lists  int
}

func (e *pullEngine) Models(context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lists++
	return slices.Clone(e.models), nil
}

func (e *pullEngine) pull(model string) (lists int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.models = append(e.models, model)
	return e.lists
}

// A model pulled onto a node after it listed its models is found by a
// request naming it once refreshEvery has passed, with no background
// probe (mcp and the command line run none); before, a node that had
// listed once was never asked again and the model stayed unknown. Within
// refreshEvery, requests naming unknown models cost the node no list.
func TestRefreshFindsAModelPulledSince(t *testing.T) {
	e := &pullEngine{models: []string{"m"}}
	n := &Node{Name: "n", Dialect: "ollama", Backend: EngineBackend(e, false), MaxOptions: 20, Timeout: time.Second}
	c := &clock{t: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	r := New([]*Node{n}, Options{})
	r.now = c.now
	known := func(model string) bool {
		if _, err := r.Limits(model); !errors.Is(err, ErrUnknownModel) {
			return err == nil
		}
		r.Refresh(t.Context())
		_, err := r.Limits(model)
		return err == nil
	}
	if !known("m") || e.lists != 1 {
		t.Fatalf("the first request: m known %v after %d lists; want true after 1", known("m"), e.lists)
	}
	if lists := e.pull("new"); known("new") || known("other") || e.lists != lists {
		t.Fatalf("within %s of the last list: %d lists, want %d (no more)", refreshEvery, e.lists, lists)
	}
	c.advance(refreshEvery)
	if !known("new") || e.lists != 2 {
		t.Fatalf("%s after the last list: new known %v after %d lists; want true after 2", refreshEvery, known("new"), e.lists)
	}
}
