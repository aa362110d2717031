package simmodel

import (
	"context"
	"math"
	"testing"

	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
)

// noneLine is the implicit option these tests show; the gateway's is
// another string, and the model takes whichever it is given.
const noneLine = "none of these fits"

// outOfScope are Banking77 cases whose intent is none of banking12's,
// asked banking12's question (q).
func outOfScope(t *testing.T, q decision.Question) []cases.Case {
	t.Helper()
	twelve := map[string]bool{}
	for _, o := range q.Options {
		twelve[o.Key] = true
	}
	var out []cases.Case
	for _, c := range sharedCases(t, "banking77-train-sample.jsonl") {
		if twelve[c.Request.Questions[0].Options[c.Expected[0]].Key] {
			continue
		}
		c.Request.Questions = []decision.Question{q}
		c.Expected = nil
		out = append(out, c)
	}
	return out
}

// withNone is q with the implicit option after its own.
func withNone(q decision.Question) decision.Question {
	q.Options = append(append([]decision.Option{}, q.Options...), decision.Option{Key: "none", Name: noneLine})
	return q
}

// Trained with out-of-scope states, the model serves its learnt P(none)
// as missing label mass, and the same P(none) on the none option's label
// when the prompt lists it: label mass without it is Mass*(1 - P(none
// shown)), to the wire's precision, and the caller's options keep their
// ratios. Held-out out-of-scope messages get less label mass than
// held-out in-scope ones.
func TestOutOfScopeServedAsLabelMassAndNoneOption(t *testing.T) {
	train, held := Split(sharedCases(t, "banking12-train-sample.jsonl"), 0.3)
	q := train[0].Request.Questions[0]
	oosTrain, oosHeld := Split(outOfScope(t, q), 0.3)
	opt := DefaultOptions()
	opt.NoneOption = noneLine
	m, err := TrainWithOutOfScope(train, oosTrain, opt)
	if err != nil {
		t.Fatal(err)
	}
	e := serve(t, m)
	massOf := func(cs []cases.Case) (mean float64) {
		for _, c := range cs {
			o, err := engine.Ask(context.Background(), e, fakeengine.DefaultModel, c.Request.State, q)
			if err != nil {
				t.Fatalf("%s: %v", c.ID, err)
			}
			n, err := engine.Ask(context.Background(), e, fakeengine.DefaultModel, c.Request.State, withNone(q))
			if err != nil {
				t.Fatalf("%s with the none option: %v", c.ID, err)
			}
			none := n.Dist[len(q.Options)]
			if math.Abs(o.Mass-DefaultMass*(1-none)) > 1e-6 || math.Abs(n.Mass-DefaultMass) > 1e-6 {
				t.Fatalf("%s: label mass %v without the none option, %v with it (P(none) %v)", c.ID, o.Mass, n.Mass, none)
			}
			for j := 1; j < len(q.Options); j++ {
				if r, s := o.Dist[0]/o.Dist[j], n.Dist[0]/n.Dist[j]; math.Abs(math.Log(r)-math.Log(s)) > 1e-6 {
					t.Fatalf("%s option %d: ratio %v without the none option, %v with it", c.ID, j, r, s)
				}
			}
			mean += o.Mass / float64(len(cs))
		}
		return mean
	}
	in, out := massOf(held[:60]), massOf(oosHeld[:60])
	t.Logf("mean label mass over 60 held-out messages: in scope %.3f, out of scope %.3f", in, out)
	if !(out < in) {
		t.Errorf("out-of-scope messages got label mass %.3f, no less than in-scope ones %.3f", out, in)
	}

	// Without out-of-scope training the mass stays Mass, and the none
	// option is an unknown question, never answered with a made-up share.
	plain, err := Train(train, opt)
	if err != nil {
		t.Fatal(err)
	}
	pe := serve(t, plain)
	if o, err := engine.Ask(context.Background(), pe, fakeengine.DefaultModel, oosHeld[0].Request.State, q); err != nil || math.Abs(o.Mass-DefaultMass) > 1e-6 {
		t.Errorf("plain model: mass %v, %v", o.Mass, err)
	}
	if _, err := engine.Ask(context.Background(), pe, fakeengine.DefaultModel, oosHeld[0].Request.State, withNone(q)); err == nil {
		t.Error("a model without the none class answered the none option")
	}
	// An out-of-scope state asked a question nothing in scope asks is an
	// error.
	other := sharedCases(t, "agnews-dev.jsonl")[:3]
	if _, err := TrainWithOutOfScope(train, other, opt); err == nil {
		t.Error("trained a none class for a question never asked in scope")
	}
}
