package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"system1/internal/cases"
	"system1/internal/simmodel"
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
	b12 := readShared(t, "banking12-train-sample.jsonl")
	q0 := b12[0].Request.Questions[0]
	var asked bankingAsked
	_ = json.Unmarshal(q0.Instructions, &asked.question)
	twelve := map[string]bool{}
	for _, o := range q0.Options {
		asked.options = append(asked.options, o.Name)
		twelve[o.Key] = true
	}
	_, in := simmodel.Split(b12, 0.3)
	var near []cases.Case
	for _, c := range readShared(t, "banking77-train-sample.jsonl") {
		if !twelve[c.Request.Questions[0].Options[c.Expected[0]].Key] {
			near = append(near, c)
		}
	}
	_, near = simmodel.Split(near, 0.3)
	_, news := simmodel.Split(readShared(t, "agnews-dev.jsonl"), 0.3)
	_, reviews := simmodel.Split(readShared(t, "sst2-dev.jsonl"), 0.3)
	// A few of each: every question is twelve options, one engine call
	// or more each on a shared two-core machine.
	const each = 16
	far := append(slices.Clone(news[:each/2]), reviews[:each/2]...)

	s := testengine.Start(t, 1)
	g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\n  timeout: 60s\n  deadline: 120s\nnodes:\n  - {name: real, url: %s, dialect: llamacpp, models: [%s], timeout: 60s}\nproviders:\n  - {name: local, kind: engine, model: %s}\n",
		s.URL, testengine.Model, testengine.Model), nil)
	if errs := g.ConfigErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	masses := func(cs []cases.Case) []float64 {
		var out []float64
		for _, c := range cs {
			q := asked.query(c.Request.State)
			body, _ := json.Marshal(map[string]any{"question": q.Question, "options": q.Options, "context": q.Context, "min_confidence": 0})
			res := decide(t, g, string(body))
			if res.Status == Failed {
				t.Fatalf("%s: %+v", c.ID, res.Error)
			}
			if res.LabelMass == nil || !(*res.LabelMass >= 0 && *res.LabelMass <= 1) {
				t.Fatalf("%s: label_mass %v from a pre-mask engine", c.ID, deref(res.LabelMass))
			}
			out = append(out, *res.LabelMass)
		}
		return out
	}
	t.Logf("tiny model (stories260K) over llama-server, banking12's question: label_mass in scope (%d) %s; near out of scope (%d) %s; far (%d) %s",
		each, quartiles(masses(in[:each])), each, quartiles(masses(near[:each])), len(far), quartiles(masses(far)))
}
