package gateway

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/fakeengine"
)

// Decide reports label_mass where the engine can know it, null where it
// cannot, and abstains below min_label_mass (configured or per request)
// saying that no option seemed to fit; an engine that cannot tell never
// abstains for it.
func TestDecideLabelMass(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.2, 0.1)}})
	t.Cleanup(f.Close)
	post := fakeengine.New(fakeengine.Options{Dialect: fakeengine.OpenAI, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.2, 0.1)}})
	t.Cleanup(post.Close)
	cfg := func(url, extra, min string) string {
		return fmt.Sprintf("gateway:\n  threshold: 0.5\n%snodes:\n  - {name: n1, url: %s, dialect: %s, models: [tiny]%s}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n",
			min, url, map[bool]string{true: "openai", false: "llamacpp"}[extra != ""], extra)
	}
	body := `{"question":"Which?","options":["a","b"]%s}`
	for _, tc := range []struct {
		name, yaml, field string
		mass              *float64
		status            string
	}{
		{"pre-mask, no minimum", cfg(f.URL, "", ""), "", new(0.3), Decided},
		{"pre-mask, configured minimum", cfg(f.URL, "", "  min_label_mass: 0.5\n"), "", new(0.3), Abstained},
		{"pre-mask, request minimum", cfg(f.URL, "", ""), `,"min_label_mass":0.5`, new(0.3), Abstained},
		{"pre-mask, request under it", cfg(f.URL, "", "  min_label_mass: 0.5\n"), `,"min_label_mass":0.25`, new(0.3), Decided},
		{"post-mask", cfg(post.URL, ", constrain: structured_outputs", "  min_label_mass: 0.5\n"), "", nil, Decided},
	} {
		g := gatewayFor(t, tc.yaml)
		if errs := g.ConfigErrors(); len(errs) > 0 {
			t.Fatal(errs)
		}
		res := decide(t, g, fmt.Sprintf(body, tc.field))
		switch {
		case res.Status != tc.status:
			t.Errorf("%s: status %s (%s)", tc.name, res.Status, res.Rationale)
		case (tc.mass == nil) != (res.LabelMass == nil) || (tc.mass != nil && math.Abs(*tc.mass-*res.LabelMass) > 0.002):
			t.Errorf("%s: label_mass %v, want %v", tc.name, deref(res.LabelMass), deref(tc.mass))
		case tc.status == Abstained && !strings.Contains(res.Rationale, "no option seemed to fit"):
			t.Errorf("%s: rationale %q does not say no option fit", tc.name, res.Rationale)
		}
	}
	g := gatewayFor(t, cfg(f.URL, "", ""))
	if res := decide(t, g, `{"question":"Which?","min_label_mass":2}`); res.Error == nil || !strings.Contains(res.Error.Message, "min_label_mass must be a number in [0,1]") {
		t.Errorf("min_label_mass 2: %+v", res.Error)
	}
}

// A label mass is reported to three significant digits, in label_mass
// and in the abstention's rationale: a model that put 0.000665 of its
// probability on the options says so, where three decimals said 0.001
// (and 0.300 was 0.301, the rounding of a one-value distribution).
func TestDecideLabelMassKeepsSignificantDigits(t *testing.T) {
	for _, tc := range []struct {
		probs []float64
		want  float64
		text  string
	}{
		{[]float64{0.0004, 0.000265}, 0.000665, "0.000665"},
		{[]float64{0.2, 0.1}, 0.3, "0.3"},
	} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(tc.probs...)}})
		t.Cleanup(f.Close)
		g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\n  min_label_mass: 0.5\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
		res := decide(t, g, `{"question":"Which?","options":["a","b"]}`)
		if res.LabelMass == nil || *res.LabelMass != tc.want {
			t.Errorf("label_mass %v, want %v", deref(res.LabelMass), tc.want)
		}
		if res.Status != Abstained || !strings.Contains(res.Rationale, "only "+tc.text+" of its probability") {
			t.Errorf("%s: rationale %q does not give the mass as %s", res.Status, res.Rationale, tc.text)
		}
	}
}

// deref shows a label mass: its value, or null.
func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// none_option asks the model over an implicit "none of these" option
// after the caller's: when it wins the answer is an abstention saying no
// option fit, never one of the caller's options; when it loses the
// decision stands, with its probability reported.
func TestDecideNoneOption(t *testing.T) {
	for _, tc := range []struct {
		probs  []float64
		status string
		none   float64
	}{
		{[]float64{0.1, 0.2, 0.7}, Abstained, 0.7},
		{[]float64{0.7, 0.2, 0.1}, Decided, 0.1},
	} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(tc.probs...)}})
		t.Cleanup(f.Close)
		g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
		res := decide(t, g, `{"question":"Which?","options":["a","b"],"none_option":true}`)
		if res.Status != tc.status || res.NoneProbability == nil || math.Abs(*res.NoneProbability-tc.none) > 0.002 || len(res.Probabilities) != 2 {
			t.Errorf("%v: status %s, none %v, probabilities %v (%s)", tc.probs, res.Status, deref(res.NoneProbability), res.Probabilities, res.Rationale)
		}
		if tc.status == Abstained && (res.Decision != nil || !strings.Contains(res.Rationale, "no option seemed to fit")) {
			t.Errorf("%v: a win of none is not an abstention saying so: %+v", tc.probs, res)
		}
		if got := f.Inferences(); len(got) != 1 || len(got[0].Labels) != 3 || !strings.Contains(got[0].User, decision.NoneOption) {
			t.Errorf("%v: the engine was not asked over the implicit option", tc.probs)
		}
		for _, bad := range []string{`{"question":"Is it?","none_option":true}`, `{"question":"Which?","options":["a","` + decision.NoneOption + `"],"none_option":true}`, `{"question":"Which?","options":["a","b"],"none_option":1}`} {
			if res := decide(t, g, bad); res.Error == nil || res.Error.Code != CodeInvalidRequest || !strings.Contains(res.Error.Message, "none_option") {
				t.Errorf("%s: %+v", bad, res.Error)
			}
		}
	}
}

// A Decisions node that refuses the question outright gives no
// probabilities: decide abstains, saying the provider declined, with
// nothing made up; a node that answers is decided as any.
func TestDecideDecisionsNodeRefusal(t *testing.T) {
	for _, tc := range []struct {
		refuse bool
		status string
	}{{true, Abstained}, {false, Decided}} {
		d := fakeengine.StartDecisions(t, fakeengine.Reply{Model: "tiny", Probs: []float64{0.8, 0.2}, Abstain: tc.refuse})
		g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\nnodes:\n  - {name: n1, url: %s, dialect: decisions, models: [tiny]}\nproviders:\n  - {name: openai, kind: engine, model: tiny}\n", d.URL))
		res := decide(t, g, `{"question":"Which?","options":["a","b"]}`)
		if res.Status != tc.status || d.Calls.Load() != 1 {
			t.Fatalf("refuse %v: %+v (%d calls)", tc.refuse, res, d.Calls.Load())
		}
		if tc.refuse && (res.Probabilities != nil || res.Confidence != nil || res.Decision != nil || res.Grade != GradeEscalate ||
			!strings.Contains(res.Rationale, `provider "openai" declined to decide (the Decisions endpoint refused to answer it) and gave no probabilities`) ||
			len(res.Attempts) != 1 || res.Attempts[0].Outcome != OutcomeAbstained) {
			t.Errorf("a refusal: %+v", res)
		}
	}
}

// With none_option the options' probabilities and none_probability are
// one distribution rounded: they sum to 1 and each is its value to three
// decimals, where each was rounded apart and a one-value rounding gave
// its value one unit more (0.1 read 0.101, 0.7 read 0.701); an
// abstention's rationale gives none's probability as reported.
func TestDecideNoneOptionRoundsAsOne(t *testing.T) {
	for _, tc := range []struct {
		probs []float64
		want  []float64 // the options', then none's
	}{
		{[]float64{0.7, 0.2, 0.1}, []float64{0.7, 0.2, 0.1}},
		{[]float64{0.1, 0.2, 0.7}, []float64{0.1, 0.2, 0.7}},
		{[]float64{0.3335, 0.3335, 0.333}, []float64{0.334, 0.333, 0.333}},
		// none wins at 0.5006, which rounds as one to 0.500: the units
		// left over go to the larger remainders.
		{[]float64{0.1997, 0.2997, 0.5006}, []float64{0.2, 0.3, 0.5}},
	} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(tc.probs...)}})
		t.Cleanup(f.Close)
		g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
		res := decide(t, g, `{"question":"Which?","options":["a","b"],"none_option":true}`)
		if res.NoneProbability == nil || len(res.Probabilities) != 2 {
			t.Fatalf("%v: none %v, probabilities %v (%s)", tc.probs, deref(res.NoneProbability), res.Probabilities, res.Rationale)
		}
		got := []float64{res.Probabilities[0].P, res.Probabilities[1].P, *res.NoneProbability}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: reported %v (options, then none), want %v", tc.probs, got, tc.want)
		}
		// The rationale's numbers are the ones reported.
		if won := fmt.Sprintf("won at probability %.3f", *res.NoneProbability); strings.Contains(res.Rationale, "no option seemed to fit") && !strings.Contains(res.Rationale, won) {
			t.Errorf("%v: none_probability %v, but the rationale says %q", tc.probs, *res.NoneProbability, res.Rationale)
		}
	}
}
