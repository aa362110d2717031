package gateway

import (
	"fmt"
	"slices"
	"testing"

	"system1/internal/cases"
	"system1/internal/testengine"
)

// Label mass on the real engine with the shared tiny model, through
// decide: banking12's question asked of held-out banking12 messages (in
// scope), of Banking77 messages of other intents (near out of scope) and
// of AG News and SST-2 texts (far). The tiny model is a 260K-parameter
// story model that cannot read a banking question, so its numbers say
// what the engine reports, not how well label mass finds states that fit
// no option; the test holds that every answer reports one, in [0,1].
func TestOutOfScopeLabelMassOnRealEngine(t *testing.T) {
	b, _, _ := bankingStates(t)
	asked := b.asked
	// A few of each: every question is twelve options, one engine call
	// or more each on a shared two-core machine.
	const each = 16
	far := append(slices.Clone(b.far[:each/2]), b.far[len(b.far)-each/2:]...) // AG News, then SST-2

	s := testengine.Start(t, 1)
	g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\n  timeout: 60s\n  deadline: 120s\nnodes:\n  - {name: real, url: %s, dialect: llamacpp, models: [%s], timeout: 60s}\nproviders:\n  - {name: local, kind: engine, model: %s}\n",
		s.URL, testengine.Model, testengine.Model))
	if errs := g.ConfigErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	masses := func(cs []cases.Case) []float64 {
		var out []float64
		for _, c := range cs {
			res := asked.decide(t, g, c.Request.State, "")
			if res.LabelMass == nil || !(*res.LabelMass >= 0 && *res.LabelMass <= 1) {
				t.Fatalf("%s: label_mass %v from a pre-mask engine", c.ID, deref(res.LabelMass))
			}
			out = append(out, *res.LabelMass)
		}
		return out
	}
	t.Logf("tiny model (stories260K) over llama-server, banking12's question: label_mass in scope (%d) %s; near out of scope (%d) %s; far (%d) %s",
		each, quartiles(masses(b.inHeld[:each])), each, quartiles(masses(b.nearHeld[:each])), len(far), quartiles(masses(far)))
}
