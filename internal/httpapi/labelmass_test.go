package httpapi_test

import (
	"testing"

	"system1/internal/config"
	"system1/internal/fakeengine"
)

// /v1/systemone tells the label mass per question where the engine
// reports before its constraint (llama.cpp, Ollama), and unknown where it
// cannot know (the OpenAI dialect, after the constraint); the body keeps
// Jev's shape either way. The mass keeps three significant digits: one of
// 0.000665 is written as such, not as 0.001 (three decimals).
func TestSystemOneLabelMassHeader(t *testing.T) {
	for _, tc := range []struct {
		dialect   fakeengine.Dialect
		constrain string
		probs     [2]float64
		want      string
	}{
		{fakeengine.LlamaCpp, "", [2]float64{0.2, 0.1}, "c=0.3"},
		{fakeengine.Ollama, "", [2]float64{0.2, 0.1}, "c=0.3"},
		{fakeengine.OpenAI, "", [2]float64{0.2, 0.1}, "c=0.3"}, // unconstrained: the raw values
		{fakeengine.OpenAI, "structured_outputs", [2]float64{0.2, 0.1}, "c=unknown"},
		{fakeengine.LlamaCpp, "", [2]float64{0.0004, 0.000265}, "c=0.000665"},
	} {
		n := startNode(t, "a", tc.dialect, fakeengine.Behavior{Logprobs: fakeengine.Probs(tc.probs[0], tc.probs[1])}, func(c *config.Node) { c.Constrain = tc.constrain })
		s := serve(t, setup{nodes: []node{n}})
		r := s.ask(t, colour("alpha,beta"))
		if got := r.header.Get("X-System1-Label-Mass"); got != tc.want {
			t.Errorf("%s: label mass header %q, want %q (%s)", tc.dialect, got, tc.want, r)
		}
		if p := probabilities(t, r); p["alpha"] < 0.6 {
			t.Errorf("%s: probabilities %v; want them renormalised over the labels", tc.dialect, p)
		}
	}
}

// A choice with more options than one call reads goes in rounds; on
// llama.cpp every round reads one prompt listing all the options, before
// the constraint, so the mass on the labels is known as with one call:
// the header gives it, and the gate refuses under it, as the docs say
// (unknown only for rounds over separate prompts).
func TestSystemOneLabelMassOverSharedRounds(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.2, 0.1, 0.1, 0.05, 0.05)},
		func(c *config.Node) { c.MaxLabels = 3 })
	s := serve(t, setup{nodes: []node{n}})
	r := s.ask(t, colour("alpha,beta,gamma,delta,epsilon"))
	if got, want := r.header.Get("X-System1-Label-Mass"), "c=0.5"; got != want {
		t.Errorf("label mass header %q, want %q (%s)", got, want, r)
	}
	if p := probabilities(t, r); p["alpha"] != 0.4 || p["epsilon"] != 0.1 {
		t.Errorf("probabilities %v; want 0.4 .. 0.1, the labels renormalised", p)
	}
	if r := s.ask(t, colour("alpha,beta,gamma,delta,epsilon"), "X-System1-Min-Label-Mass: 0.6"); r.status != 422 {
		t.Errorf("a mass of 0.5 under a gate of 0.6: status %d, want 422 (%s)", r.status, r)
	}
}
