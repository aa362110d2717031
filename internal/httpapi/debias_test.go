package httpapi_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

func colour(order string) string {
	var crit []string
	for _, k := range strings.Split(order, ",") {
		crit = append(crit, `"`+k+`":null`)
	}
	return `{"model":"fake","state":"s","questions":{"c":{"type":"choice","instructions":"Which?","criteria":{` + strings.Join(crit, ",") + `}}}}`
}

func probabilities(t *testing.T, r reply) map[string]float64 {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %s", r)
	}
	var out struct {
		Answers map[string]struct{ Probabilities map[string]float64 }
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Answers["c"].Probabilities
}

// On /v1/systemone, X-System1-Debias: permute asks every cyclic shift of
// the options, so a request whose options are a shift of another's gets
// the same probabilities; the steps header names the step, off names
// none, and the extra calls are made and counted.
func TestSystemOneDebiasHeader(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.FirstBiased})
	s := serve(t, setup{nodes: []node{n}})
	for _, tc := range []struct {
		header, steps string
		calls         int
		same          bool
	}{
		{"", "none", 1, false},
		{"X-System1-Debias: off", "none", 1, false},
		{"X-System1-Debias: permute", "debias=permute/3", 3, true},
		{"X-System1-Debias: PERMUTE", "debias=permute/3", 3, true},
	} {
		var hs []string
		if tc.header != "" {
			hs = append(hs, tc.header)
		}
		n.fake.Reset()
		ra := s.ask(t, colour("alpha,beta,gamma"), hs...)
		if got := len(n.fake.Inferences()); got != tc.calls {
			t.Errorf("%q: %d engine calls, want %d", tc.header, got, tc.calls)
		}
		rb := s.ask(t, colour("gamma,alpha,beta"), hs...)
		for _, r := range []reply{ra, rb} {
			if got := r.header.Get("X-System1-Steps"); got != tc.steps {
				t.Errorf("%q: steps header %q, want %q", tc.header, got, tc.steps)
			}
		}
		pa, pb := probabilities(t, ra), probabilities(t, rb)
		worst := 0.0
		for k := range pa {
			worst = max(worst, math.Abs(pa[k]-pb[k]))
		}
		if tc.same && worst > 0.011 { // two decimals on the wire
			t.Errorf("%q: shifted requests differ by %v: %v vs %v", tc.header, worst, pa, pb)
		}
		if !tc.same && worst < 0.1 {
			t.Errorf("%q: shifted requests agree (%v: %v vs %v), so the bias was not there to remove", tc.header, worst, pa, pb)
		}
	}
	want422(t, s.ask(t, colour("alpha,beta"), "X-System1-Debias: sometimes"), "X-System1-Debias", "header", "X-System1-Debias")
}

// debias: permute in the configuration applies to every request that
// does not say otherwise, with the orders bounded by debias_orders.
func TestSystemOneDebiasConfigured(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.FirstBiased})
	s := serve(t, setup{nodes: []node{n}, debias: fleet.Debias{Permute: true, Orders: 2}})
	r := s.ask(t, colour("alpha,beta,gamma"))
	if got := r.header.Get("X-System1-Steps"); got != "debias=permute/2" || len(n.fake.Inferences()) != 2 {
		t.Errorf("steps %q after %d calls; want debias=permute/2 after 2", got, len(n.fake.Inferences()))
	}
	n.fake.Reset()
	r = s.ask(t, colour("alpha,beta,gamma"), "X-System1-Debias: off")
	if got := r.header.Get("X-System1-Steps"); got != "none" || len(n.fake.Inferences()) != 1 {
		t.Errorf("off: steps %q after %d calls; want none after 1", got, len(n.fake.Inferences()))
	}
}
