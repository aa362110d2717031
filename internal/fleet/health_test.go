package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
