package fleet

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/testengine"
)

// realRouter is a router over one real llama-server serving the tiny
// model.
func realRouter(t testing.TB) *Router {
	t.Helper()
	s := testengine.Start(t, 1)
	n, err := NewNode(config.Node{Name: "real", URL: s.URL, Dialect: "llamacpp"}, func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{})
	r.Refresh(t.Context())
	return r
}

// storyQuestion is a choice over four story characters, in the order
// shifted by k.
func storyQuestion(k int) decision.Request {
	names := []string{"Tim", "Lily", "Ben", "Sue"}
	q := decision.Question{ID: "who", Kind: decision.Choice, Instructions: json.RawMessage(`"Who found the ball?"`)}
	for i := range names {
		n := names[(i+k)%len(names)]
		q.Options = append(q.Options, decision.Option{Key: n, Name: n})
	}
	return decision.Request{Model: testengine.Model, State: json.RawMessage(`"Once upon a time Lily found a red ball in the park."`), Questions: []decision.Question{q}}
}

// On the real engine and the tiny model, the largest change of any
// option's probability over the four orders of the options, raw and with
// every shift asked: raw moves with the order, debiased does not (within
// the engine's own float noise).
func TestRealEngineDebiasOrderSensitivity(t *testing.T) {
	r := realRouter(t)
	for _, mode := range []string{decision.DebiasOff, decision.DebiasPermute} {
		lo, hi := map[string]float64{}, map[string]float64{}
		for k := range 4 {
			req := storyQuestion(k)
			req.Debias = mode
			a := decide(t, r, req)
			if a.Err != nil {
				t.Fatalf("%s, shift %d: %v", mode, k, a.Err)
			}
			for i, o := range req.Questions[0].Options {
				p := a.Dist[i]
				if l, ok := lo[o.Key]; !ok || p < l {
					lo[o.Key] = p
				}
				hi[o.Key] = max(hi[o.Key], p)
			}
		}
		worst := 0.0
		for k := range lo {
			worst = max(worst, hi[k]-lo[k])
		}
		t.Logf("debias %s: order sensitivity %.4f (largest change of an option's probability over 4 orders)", mode, worst)
		switch {
		case mode == decision.DebiasOff && !(worst > 0.01):
			t.Errorf("raw order sensitivity %.4f: the tiny model should move with the order", worst)
		case mode == decision.DebiasPermute && !(worst < 0.01):
			t.Errorf("every shift asked, yet order sensitivity %.4f", worst)
		}
	}
}

// The latency of one question over 1 to 4 orders on the real engine,
// over a state the engine has seen (warm: the question is new each time,
// the state the same) and over a new state each time (cold). The
// difference between sub-benchmarks of one state is the cost of an extra
// order: each is one more engine call over the cached state, asked after
// the one before, so it costs the question's own tokens.
func BenchmarkRealEngineDebiasOrders(b *testing.B) {
	r := realRouter(b)
	for _, state := range []string{"warm", "cold"} {
		for orders := 1; orders <= 4; orders++ {
			b.Run(fmt.Sprintf("state=%s/orders=%d", state, orders), func(b *testing.B) {
				r.debias = Debias{Permute: orders > 1, Orders: orders}
				var took []time.Duration
				i := 0
				for b.Loop() {
					i++
					req := storyQuestion(0)
					// A new question each time, so that no order finds its
					// whole prompt cached from the iteration before.
					req.Questions[0].Instructions = json.RawMessage(fmt.Sprintf(`"Who found the ball? (%d)"`, i))
					if state == "cold" {
						req.State = json.RawMessage(fmt.Sprintf(`"Once upon a time, on day %d, Lily found a red ball in the park."`, i))
					}
					start := time.Now()
					res, err := r.Decide(b.Context(), req)
					if err != nil || res.Questions[0].Err != nil {
						b.Fatal(err, res.Questions[0].Err)
					}
					took = append(took, time.Since(start))
				}
				// The median is reported beside the mean: on a shared
				// machine a few stalls dominate the mean.
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms/op")
			})
		}
	}
}
