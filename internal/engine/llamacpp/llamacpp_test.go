package llamacpp

import (
	"context"
	"fmt"
	"math"
	"slices"
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
			labels, err := e.Labels(ctx, testengine.Model, engine.Candidates(q), len(q.Options))
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
	got, err := e.Labels(context.Background(), testengine.Model, []string{"A", "B", "Z", "0", "9", "AB", "zebra"}, 10)
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

func manyOptions(t *testing.T, n int) decision.Question {
	t.Helper()
	q := decision.Question{ID: "intent", Kind: decision.Choice, Instructions: []byte(`"Which word fits the story?"`)}
	for i := range n {
		k := fmt.Sprintf("option_%d", i)
		q.Options = append(q.Options, decision.Option{Key: k, Name: k})
	}
	return q
}

// Rounds of 20 labels over one shared prompt give the distribution one
// call gives: llama-server's values are pre-mask, one softmax for every
// round, so the anchor ratios are the one-call ratios. Cold and warm
// prefills differ by about 1e-4 (see above), hence the tolerance.
func TestRealEngineStitchedEqualsOneCall(t *testing.T) {
	srv := testengine.Start(t, 1)
	ctx := context.Background()
	state := []byte(`"Once upon a time, Lily found a shiny red ball in the park."`)
	q := manyOptions(t, 60) // within the tiny model's single-token labels
	one := &Engine{BaseURL: srv.URL}
	whole, err := engine.Ask(ctx, one, testengine.Model, state, q)
	if err != nil {
		t.Fatal(err)
	}
	if whole.Rounds != 1 {
		t.Fatalf("one call took %d rounds", whole.Rounds)
	}
	capped := &Engine{BaseURL: srv.URL, PerCall: 20}
	stitched, err := engine.Ask(ctx, capped, testengine.Model, state, q)
	if err != nil {
		t.Fatal(err)
	}
	if stitched.Rounds != 4 || !stitched.Shared {
		t.Fatalf("%d rounds, shared %v; want 4 over one prompt", stitched.Rounds, stitched.Shared)
	}
	var worst float64
	for i := range whole.Dist {
		worst = math.Max(worst, math.Abs(whole.Dist[i]-stitched.Dist[i]))
	}
	if worst > 1e-3 {
		t.Fatalf("stitched differs from one call by %v", worst)
	}
	t.Logf("60 options: one call vs 4 stitched rounds differ by at most %.2e", worst)
}

// The tiny model's 512-token vocabulary has about a hundred single-token
// labels, fewer than 255 options: those go in rounds over separate prompts
// and are still served, every probability from the engine.
func TestRealEngineServes255Options(t *testing.T) {
	srv := testengine.Start(t, 1)
	e := &Engine{BaseURL: srv.URL}
	labels, err := e.Labels(context.Background(), testengine.Model, engine.Candidates(decision.Question{Kind: decision.Choice}), 255)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the tiny model has %d single-token labels among the candidates", len(labels))
	q := manyOptions(t, 255)
	o, err := engine.Ask(context.Background(), e, testengine.Model, []byte(`"Once upon a time."`), q)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Dist.Check(255); err != nil {
		t.Fatal(err)
	}
	if len(labels) < 255 && (o.Rounds < 2 || o.Shared) {
		t.Fatalf("%d labels for 255 options in %d rounds (shared %v)", len(labels), o.Rounds, o.Shared)
	}
	// Labels below the 64 alternatives are not asked for again when
	// together they cannot hold 1% of the labels' mass; they are flagged,
	// at 0.
	for i, opt := range q.Options {
		if slices.Contains(o.Missing, opt.Key) && o.Dist[i] != 0 {
			t.Fatalf("missing option %s reported %v", opt.Key, o.Dist[i])
		}
	}
	t.Logf("255 options in %d rounds; %d labels below the engine's alternatives, flagged", o.Rounds, len(o.Missing))
}

// The grammar's language is exactly the labels, each quoted as GBNF reads it.
func TestGrammar(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{[]string{"A", "B"}, `root ::= "A" | "B"`},
		{[]string{"0", "1", "2"}, `root ::= "0" | "1" | "2"`},
		{[]string{"AB"}, `root ::= "AB"`},
	} {
		if got := Grammar(tc.labels); got != tc.want {
			t.Errorf("Grammar(%q) = %s, want %s", tc.labels, got, tc.want)
		}
	}
}
