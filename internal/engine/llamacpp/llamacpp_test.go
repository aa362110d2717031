package llamacpp

import (
	"context"
	"math"
	"testing"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/systemone"
	"system1/internal/testengine"
)

func parse(t *testing.T, body string) decision.Request {
	t.Helper()
	p := systemone.ParseRequest([]byte(body))
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatal(ps)
	}
	return p.Request
}

// On the real engine every probability comes from the engine's own
// logprobs: renormalising the reported label logprobs by hand gives the
// same distribution, and identical requests at temperature 0 agree. The
// first call prefills the whole prompt and later ones reuse the cached
// prefix; llama.cpp's logits differ across those batch shapes by about
// 1e-4, so cold and warm calls agree to 1e-3 and warm calls exactly.
func TestRealEngineReadsLabelLogprobs(t *testing.T) {
	srv := testengine.Start(t, 1)
	e := &Engine{BaseURL: srv.URL}
	ctx := context.Background()
	req := parse(t, `{"model":"x","state":"Once upon a time, there was a little dog.","questions":{
		"animal":{"type":"choice","instructions":"Which animal is in the story?","criteria":{"dog":null,"cat":null,"bird":"a small bird"}},
		"happy":{"type":"noul","instructions":"Is the story happy?"},
		"size":{"type":"score","criteria":["tiny","small","big"]}}}`)
	for _, q := range req.Questions {
		t.Run(q.ID, func(t *testing.T) {
			cold, err := engine.Ask(ctx, e, testengine.Model, req.State, q)
			if err != nil {
				t.Fatal(err)
			}
			first, err := engine.Ask(ctx, e, testengine.Model, req.State, q)
			if err != nil {
				t.Fatal(err)
			}
			if cold.Dist.Argmax() != first.Dist.Argmax() {
				t.Errorf("cold %v and warm %v pick different options", cold.Dist, first.Dist)
			}
			for i := range cold.Dist {
				if math.Abs(cold.Dist[i]-first.Dist[i]) > 1e-3 {
					t.Errorf("cold %v and warm %v disagree", cold.Dist, first.Dist)
				}
			}
			if err := first.Dist.Check(len(q.Options)); err != nil {
				t.Fatal(err)
			}
			if len(first.Missing) > 0 || first.Estimated || first.InputTokens == 0 {
				t.Errorf("outcome %+v", first)
			}
			if !(first.Mass > 0 && first.Mass <= 1) {
				t.Errorf("label mass %v: llama-server reports pre-mask values", first.Mass)
			}
			// Recompute from a raw reading.
			labels, err := e.Labels(ctx, testengine.Model, engine.Candidates(q)[:len(q.Options)])
			if err != nil {
				t.Fatal(err)
			}
			r, err := e.Read(ctx, testengine.Model, engine.Layout(req.State, q, labels))
			if err != nil {
				t.Fatal(err)
			}
			var sum float64
			for _, lp := range r.Logprobs {
				sum += math.Exp(lp)
			}
			for i, lp := range r.Logprobs {
				if want := math.Exp(lp) / sum; math.Abs(first.Dist[i]-want) > 1e-9 {
					t.Errorf("p[%d] = %v; the engine's logprobs give %v", i, first.Dist[i], want)
				}
			}
			again, err := engine.Ask(ctx, e, testengine.Model, req.State, q)
			if err != nil {
				t.Fatal(err)
			}
			for i := range first.Dist {
				if math.Abs(first.Dist[i]-again.Dist[i]) > 1e-9 {
					t.Fatalf("temperature 0 disagrees with itself: %v then %v", first.Dist, again.Dist)
				}
			}
			t.Logf("%s: %v (label mass %.3f)", q.ID, first.Dist, first.Mass)
		})
	}
}

func TestRealEngineLabelsAreSingleTokens(t *testing.T) {
	srv := testengine.Start(t, 1)
	e := &Engine{BaseURL: srv.URL}
	got, err := e.Labels(context.Background(), testengine.Model, []string{"A", "B", "Z", "0", "9", "AB", "zebra"})
	if err != nil {
		t.Fatal(err)
	}
	// The tiny model's 512-token vocabulary has single letters and digits,
	// not "AB" or "zebra".
	want := []string{"A", "B", "Z", "0", "9"}
	if len(got) != len(want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("labels %v, want %v", got, want)
		}
	}
}
