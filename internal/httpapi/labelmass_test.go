package httpapi_test

import (
	"testing"

	"system1/internal/config"
	"system1/internal/fakeengine"
)

// /v1/systemone tells the label mass per question where the engine
// reports before its constraint (llama.cpp, Ollama), and unknown where it
// cannot know (the OpenAI dialect, after the constraint); the body keeps
// Jev's shape either way.
func TestSystemOneLabelMassHeader(t *testing.T) {
	for _, tc := range []struct {
		dialect   fakeengine.Dialect
		constrain string
		want      string
	}{
		{fakeengine.LlamaCpp, "", "c=0.300"},
		{fakeengine.Ollama, "", "c=0.300"},
		{fakeengine.OpenAI, "", "c=0.300"}, // unconstrained: the raw values
		{fakeengine.OpenAI, "structured_outputs", "c=unknown"},
	} {
		n := startNode(t, "a", tc.dialect, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.2, 0.1)}, func(c *config.Node) { c.Constrain = tc.constrain })
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
