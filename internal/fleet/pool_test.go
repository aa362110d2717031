package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/engine"
	"system1/internal/fakeengine"
)

// roundRobin is a small load balancer in front of members: each call goes
// to the next member in turn, whatever it carries, as a pool's router
// that knows nothing of system1's slots would send it.
func roundRobin(t *testing.T, members ...*fakeengine.Fake) string {
	t.Helper()
	proxies := make([]*httputil.ReverseProxy, len(members))
	for i, m := range members {
		u, err := url.Parse(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		proxies[i] = httputil.NewSingleHostReverseProxy(u)
	}
	var next atomic.Uint64
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[(next.Add(1)-1)%uint64(len(proxies))].ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)
	return lb.URL
}

// slotted reports whether an engine call names a llama.cpp slot.
func slotted(r fakeengine.Request) bool {
	var body struct {
		IDSlot *int `json:"id_slot"`
	}
	return json.Unmarshal(r.Body, &body) == nil && body.IDSlot != nil
}

// A pool node in front of two llama-servers behind a round-robin load
// balancer: no call names a slot (id_slot) or primes one (POST
// /completion), no call carries a header the members could be pinned
// by, and the questions of one state reach both members. The same
// balancer as a plain llamacpp node pins each call to a slot: what the
// pool turns off.
func TestPoolPinsNothingToItsMembers(t *testing.T) {
	for _, pool := range []bool{true, false} {
		t.Run(fmt.Sprintf("pool=%v", pool), func(t *testing.T) {
			var members []*fakeengine.Fake
			for range 2 {
				f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 4})
				t.Cleanup(f.Close)
				members = append(members, f)
			}
			c := config.Node{Name: "pool", URL: roundRobin(t, members...), Dialect: "llamacpp", Pool: pool}
			n, err := NewNode(c, func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			r := New([]*Node{n}, Options{})
			r.Refresh(context.Background())
			const state = "one ticket, asked about three times over"
			for range 3 {
				res, err := r.Decide(context.Background(), manyOptions(state, 4, 3))
				answered(t, "a request over one state", res, err)
			}

			var calls, pinned, primed int
			reached := 0
			for i, m := range members {
				got := 0
				for _, rq := range m.Requests() {
					if rq.Inference || rq.Path == "/completion" {
						calls++
					}
					if slotted(rq) {
						pinned++
					}
					if rq.Path == "/completion" {
						primed++
					}
					if rq.Inference && strings.Contains(rq.User, state) {
						got++
					}
					if pool {
						for h := range rq.Header {
							if h != "Accept-Encoding" && h != "Content-Type" && h != "Content-Length" && h != "User-Agent" && h != "X-Forwarded-For" {
								t.Errorf("member %d: a call carries header %s", i, h)
							}
						}
					}
				}
				if got > 0 {
					reached++
				}
			}
			if calls == 0 {
				t.Fatal("no engine call reached the members")
			}
			if pool {
				if pinned > 0 || primed > 0 {
					t.Errorf("a pool node sent %d calls naming a slot and %d priming tasks of %d calls", pinned, primed, calls)
				}
				if reached != 2 {
					t.Errorf("the questions of one state reached %d of the pool's 2 members", reached)
				}
			} else if pinned == 0 {
				t.Errorf("a plain llamacpp node sent no call naming a slot among %d: the comparison shows nothing", calls)
			}
		})
	}
}

// A pool node is one node for health and cooldowns: an error status its
// router answers with is one member's failure, which counts toward a
// cooldown (AllowedFails within Window) rather than cooling the pool at
// once as it cools a single engine; a pool that does not answer at all
// (a refused connection) is down, and cools at once.
func TestPoolCoolsDownOnItsRoutersFailuresInTurn(t *testing.T) {
	policy := Policy{AllowedFails: 3, Window: time.Minute, Cooldown: time.Minute}
	for _, tc := range []struct {
		name      string
		pool      bool
		f         *engine.Failure
		coolAfter int // failures until the node cools; 0: never within 5
	}{
		{"pool, 503", true, engine.StatusFailure(503, 0, "no endpoint"), 3},
		{"pool, 502", true, engine.StatusFailure(502, 0, "bad gateway"), 3},
		{"pool, refused", true, &engine.Failure{Kind: engine.Unavailable, Err: fmt.Errorf("connection refused")}, 1},
		{"pool, 429", true, engine.StatusFailure(429, 0, "slow down"), 1},
		{"pool, 400", true, engine.StatusFailure(400, 0, "bad request"), 0},
		{"engine, 503", false, engine.StatusFailure(503, 0, "down"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{Name: "n", Pool: tc.pool}
			r := New([]*Node{n}, Options{Policy: policy})
			cooled := 0
			for i := 1; i <= 5 && cooled == 0; i++ {
				r.blame(n, "m", tc.f)
				if !n.State(r.now()).Healthy {
					cooled = i
				}
			}
			if cooled != tc.coolAfter {
				t.Errorf("cooled after %d failures, want %d", cooled, tc.coolAfter)
			}
		})
	}
}

// A pool node's slots are its max_inflight, not the slots the member
// its router picked reports: /health's slots and the row-wise capacity
// size a batch by the pool, where one llama-server's /props made a pool
// of two 4-slot members with max_inflight 8 read as 4.
func TestPoolSlotsAreItsMaxInflight(t *testing.T) {
	for _, tc := range []struct {
		pool bool
		want int
	}{{true, 8}, {false, 4}} {
		t.Run(fmt.Sprintf("pool=%v", tc.pool), func(t *testing.T) {
			var members []*fakeengine.Fake
			for range 2 {
				f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 4})
				t.Cleanup(f.Close)
				members = append(members, f)
			}
			c := config.Node{Name: "pool", URL: roundRobin(t, members...), Dialect: "llamacpp", Pool: tc.pool, MaxInFlight: 8, Models: []string{"tiny"}}
			n, err := NewNode(c, func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			r := New([]*Node{n}, Options{})
			if got := r.Capacity(context.Background(), "tiny", 1); got != tc.want {
				t.Errorf("capacity %d, want %d", got, tc.want)
			}
			if got := r.States()[0].Slots; got != tc.want {
				t.Errorf("/health slots %d, want %d", got, tc.want)
			}
		})
	}
}

// A health probe the pool's router answers with a 5xx (one member
// failing behind a router that still routes) counts toward a cooldown as
// a request's does, rather than cooling the whole pool at once; a refused
// connection still cools it at once, as it would one engine.
func TestPoolProbeCoolsOnItsRoutersFailuresInTurn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pool      bool
		status    int // 0: the connection is refused
		coolAfter int
	}{
		{"pool, 503", true, 503, 3},
		{"pool, refused", true, 0, 1},
		{"engine, 503", false, 503, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "no healthy upstream", tc.status)
			}))
			t.Cleanup(srv.Close)
			if tc.status == 0 {
				srv.Close()
			}
			n, err := NewNode(config.Node{Name: "n", URL: srv.URL, Dialect: "openai", Pool: tc.pool, Models: []string{"m"}}, func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			r := New([]*Node{n}, Options{Fingerprint: FingerprintOptions{Off: true}})
			cooled := 0
			for i := 1; i <= 5 && cooled == 0; i++ {
				r.Probe(context.Background())
				if !n.State(r.now()).Healthy {
					cooled = i
				}
			}
			if cooled != tc.coolAfter {
				t.Errorf("cooled after %d failed probes, want %d", cooled, tc.coolAfter)
			}
		})
	}
}
