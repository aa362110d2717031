package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/simmodel"
	"system1/internal/testengine"
)

// readShared reads a case file of ../shared/data; the test skips when it
// is not there.
func readShared(t *testing.T, name string) []cases.Case {
	t.Helper()
	cs, err := cases.ReadFiles(0, testengine.SharedData(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// bankingAsked is banking12's question as a decide request asks it: its
// instructions as the question, its intents' names as the options, a
// state's text as the context's message.
type bankingAsked struct {
	question string
	options  []string
}

func (b bankingAsked) query(state json.RawMessage) query {
	var text string
	if json.Unmarshal(state, &text) != nil {
		text = string(state)
	}
	ctx, _ := json.Marshal(map[string]string{"message": text}) // a map of strings always marshals
	return query{Question: b.question, Options: b.options, Context: ctx}
}

// asCase is c's state asked banking12's question the way decide asks it,
// expecting expected (nil for a state that fits no option).
func (b bankingAsked) asCase(c cases.Case, expected []int) cases.Case {
	return cases.Case{ID: c.ID, Set: c.Set, Request: b.query(c.Request.State).request(fakeengine.DefaultModel), Expected: expected}
}

// oosRow is what one way of asking flagged: the share of each group's
// answers abstained on because no option seemed to fit, and the accuracy
// of the in-scope decisions kept.
type oosRow struct {
	name                      string
	inLost, near, far, acc    float64
	kept, right               int
	inMass, nearMass, farMass []float64
}

// Out of scope on the simulated model through the gateway's decide, as
// shipped: banking12's question asked of held-out banking12 messages (in
// scope), of held-out Banking77 messages whose intent is none of the
// twelve (near out of scope, CLINC150's kind) and of AG News and SST-2
// texts (far out of scope: a news story or a film review asked a banking
// intent). The model learnt its "fits none" class from the training
// split of the near out-of-scope messages alone; the far ones are new to
// it. The table is the share flagged by min_label_mass at several gates,
// by none_option and by both, the in-scope answers lost to each, and the
// accuracy of the in-scope answers kept. It claims that each flags
// out-of-scope states more often than it loses in-scope ones, and that
// every abstention below the gate is an answer whose label_mass is under
// it; the numbers are a simulation's.
func TestOutOfScopeOnSimulatedModel(t *testing.T) {
	b := bankingOnSimulatedModel(t)
	asked, inHeld, nearHeld, far := b.asked, b.inHeld, b.nearHeld, b.far
	g := gatewayFor(t, b.config())
	if errs := g.ConfigErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}

	// ask decides state under extra request fields, with no confidence
	// gate, so that an abstention is one of the out-of-scope kind.
	ask := func(state json.RawMessage, extra string) *Response {
		return asked.decide(t, g, state, extra)
	}
	flagged := func(res *Response) bool {
		return res.Status == Abstained && strings.Contains(res.Rationale, "no option seemed to fit")
	}
	// measure asks every held-out state with extra; gate is the request's
	// min_label_mass (0 for none), and with none set the none option is
	// shown too.
	measure := func(name, extra string, gate float64, none bool) oosRow {
		row := oosRow{name: name}
		for _, c := range inHeld {
			res := ask(c.Request.State, extra)
			if res.LabelMass == nil {
				t.Fatalf("%s: no label_mass from a pre-mask engine", c.ID)
			}
			row.inMass = append(row.inMass, *res.LabelMass)
			if (res.NoneProbability != nil) != none {
				t.Fatalf("%s %s: none_probability %v", name, c.ID, deref(res.NoneProbability))
			}
			// The gate compares the unrounded mass: away from it, the
			// reported one tells which side it fell.
			if !none && math.Abs(*res.LabelMass-gate) > 1e-3 && flagged(res) != (*res.LabelMass < gate) {
				t.Errorf("%s %s: label_mass %v, gate %v, yet %s (%s)", name, c.ID, *res.LabelMass, gate, res.Status, res.Rationale)
			}
			if flagged(res) {
				row.inLost++
				continue
			}
			row.kept++
			if res.Decision != nil && *res.Decision == asked.options[c.Expected[0]] {
				row.right++
			}
		}
		row.inLost /= float64(len(inHeld))
		row.acc = float64(row.right) / float64(max(row.kept, 1))
		for _, grp := range []struct {
			cs    []cases.Case
			share *float64
			mass  *[]float64
		}{{nearHeld, &row.near, &row.nearMass}, {far, &row.far, &row.farMass}} {
			for _, c := range grp.cs {
				res := ask(c.Request.State, extra)
				*grp.mass = append(*grp.mass, *res.LabelMass)
				if flagged(res) {
					*grp.share++
				}
			}
			*grp.share /= float64(len(grp.cs))
		}
		return row
	}

	rows := []oosRow{measure("no gate", "", 0, false)}
	for _, gate := range []float64{0.3, 0.5, 0.7, 0.8} {
		rows = append(rows, measure(fmt.Sprintf("min_label_mass %.1f", gate), fmt.Sprintf(`,"min_label_mass":%v`, gate), gate, false))
	}
	rows = append(rows, measure("none_option", `,"none_option":true`, 0, true),
		measure("none_option + min_label_mass 0.5", `,"none_option":true,"min_label_mass":0.5`, 0.5, true))

	t.Logf("banking12's question on the simulated model (none class learnt from %d near out-of-scope training messages beside %d in scope); held out: %d in scope, %d near out of scope (Banking77, other intents), %d far (AG News and SST-2, half each)",
		b.nearTrain, b.inTrain, len(inHeld), len(nearHeld), len(far))
	t.Logf("label_mass quartiles (no gate): in scope %s; near %s; far %s", quartiles(rows[0].inMass), quartiles(rows[0].nearMass), quartiles(rows[0].farMass))
	t.Logf("| asked with | in-scope lost | near OOS flagged | far OOS flagged | accuracy of in-scope kept (right/kept) |")
	t.Logf("|---|---|---|---|---|")
	for _, r := range rows {
		t.Logf("| %s | %.3f | %.3f | %.3f | %.3f (%d/%d) |", r.name, r.inLost, r.near, r.far, r.acc, r.right, r.kept)
	}

	if rows[0].inLost != 0 || rows[0].near != 0 || rows[0].far != 0 {
		t.Errorf("with no gate and no none option, something was flagged: %+v", rows[0])
	}
	for _, r := range rows[1:] {
		if r.name == "min_label_mass 0.3" {
			continue // a low gate may flag nothing at all
		}
		if !(r.near > r.inLost) || !(r.far > r.inLost) {
			t.Errorf("%s flagged %.3f of near and %.3f of far out-of-scope states, no more than the %.3f of in-scope answers it lost", r.name, r.near, r.far, r.inLost)
		}
	}
	if !(mean(rows[0].nearMass) < mean(rows[0].inMass)) || !(mean(rows[0].farMass) < mean(rows[0].inMass)) {
		t.Errorf("mean label_mass in scope %.3f, near %.3f, far %.3f: out-of-scope states should get less", mean(rows[0].inMass), mean(rows[0].nearMass), mean(rows[0].farMass))
	}
}

// bankingSim is banking12's question on the simulated model with a "fits
// none" class, and the held-out states to ask it of.
type bankingSim struct {
	asked bankingAsked
	// inHeld are held-out banking12 cases, nearHeld held-out Banking77
	// cases of other intents, far AG News and SST-2 cases.
	inHeld, nearHeld, far []cases.Case
	// inTrain and nearTrain count the cases trained on.
	inTrain, nearTrain int
	engine             *fakeengine.Fake
}

// bankingOnSimulatedModel trains the simulated model on banking12's
// training split, its none class on the training split of the Banking77
// messages whose intent is none of the twelve, and serves it on a fake
// llama.cpp engine.
func bankingOnSimulatedModel(t *testing.T) *bankingSim {
	t.Helper()
	b, inTrain, nearTrain := bankingStates(t)
	var train, oos []cases.Case
	for _, c := range inTrain {
		train = append(train, b.asked.asCase(c, c.Expected))
	}
	for _, c := range nearTrain {
		oos = append(oos, b.asked.asCase(c, nil))
	}
	opt := simmodel.DefaultOptions()
	opt.NoneOption = decision.NoneOption
	m, err := simmodel.TrainWithOutOfScope(train, oos, opt)
	if err != nil {
		t.Fatal(err)
	}
	b.engine = fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: m.Behavior()})
	t.Cleanup(b.engine.Close)
	return b
}

// bankingStates are banking12's question and the states to ask it of,
// split by simmodel.Split (30% held out), with the training splits of the
// in-scope and the near out-of-scope cases.
func bankingStates(t *testing.T) (b *bankingSim, inTrain, nearTrain []cases.Case) {
	t.Helper()
	b12 := readShared(t, "banking12-train-sample.jsonl")
	q0 := b12[0].Request.Questions[0]
	b = &bankingSim{}
	_ = json.Unmarshal(q0.Instructions, &b.asked.question)
	twelve := map[string]bool{}
	for _, o := range q0.Options {
		b.asked.options = append(b.asked.options, o.Name)
		twelve[o.Key] = true
	}
	inTrain, inHeld := simmodel.Split(b12, 0.3)
	var near []cases.Case
	for _, c := range readShared(t, "banking77-train-sample.jsonl") {
		if !twelve[c.Request.Questions[0].Options[c.Expected[0]].Key] {
			near = append(near, c)
		}
	}
	nearTrain, nearHeld := simmodel.Split(near, 0.3)
	_, news := simmodel.Split(readShared(t, "agnews-dev.jsonl"), 0.3)
	_, reviews := simmodel.Split(readShared(t, "sst2-dev.jsonl"), 0.3)
	b.inHeld, b.nearHeld = inHeld, nearHeld
	b.far = append(slices.Clone(news[:min(len(news), 100)]), reviews[:min(len(reviews), 100)]...)
	b.inTrain, b.nearTrain = len(inTrain), len(nearTrain)
	return b, inTrain, nearTrain
}

// config is a gateway configuration asking the simulated model.
func (b *bankingSim) config() string {
	return fmt.Sprintf("gateway:\n  threshold: 0.5\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", b.engine.URL)
}

// decide asks g banking12's question of state under extra request
// fields, with no confidence gate, so that an abstention is one of the
// out-of-scope kind.
func (b bankingAsked) decide(t *testing.T, g *Gateway, state json.RawMessage, extra string) *Response {
	t.Helper()
	q := b.query(state)
	body, _ := json.Marshal(map[string]any{"question": q.Question, "options": q.Options, "context": q.Context, "min_confidence": 0})
	res := decide(t, g, strings.TrimSuffix(string(body), "}")+extra+"}")
	if res.Status == Failed {
		t.Fatalf("%s: %+v", extra, res.Error)
	}
	return res
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// quartiles shows xs' mean and quartiles.
func quartiles(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(q float64) float64 { return s[int(math.Round(q*float64(len(s)-1)))] }
	return fmt.Sprintf("mean %.3f, quartiles %.3f/%.3f/%.3f", mean(s), at(0.25), at(0.5), at(0.75))
}
