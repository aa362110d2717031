package simmodel

import (
	"context"
	"math"
	"testing"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/fakeengine"
	"system1/internal/testengine"
)

// sharedCases reads a case file of ../shared/data ($SYSTEM1_DATA
// overrides the folder); the test skips when it is not there.
func sharedCases(t testing.TB, name string) []cases.Case {
	t.Helper()
	cs, err := cases.ReadFiles(0, testengine.SharedData(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// trained is a model trained with the default options on 70% of the
// shared case file name, and the other 30%, held out.
func trained(t testing.TB, name string) (*Model, []cases.Case) {
	t.Helper()
	train, held := Split(sharedCases(t, name), 0.3)
	m, err := Train(train, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return m, held
}

var sets = []struct {
	file  string
	floor float64 // the majority-class floor the data README gives
}{
	{"banking12-train-sample.jsonl", 0.083},
	{"agnews-dev.jsonl", 0.25},
	{"sst2-dev.jsonl", 0.509},
}

// serve starts a fake llama.cpp engine serving m and returns system1's
// client for it.
func serve(t *testing.T, m *Model) engine.Engine {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: m.Behavior()})
	t.Cleanup(f.Close)
	return &llamacpp.Engine{BaseURL: f.URL}
}

// ask asks every question of cs through e and returns what system1 read,
// as labelled predictions.
func ask(t *testing.T, e engine.Engine, cs []cases.Case) []calibration.Prediction {
	t.Helper()
	var out []calibration.Prediction
	for _, c := range cs {
		for i, q := range c.Request.Questions {
			o, err := engine.Ask(context.Background(), e, fakeengine.DefaultModel, c.Request.State, q)
			if err != nil {
				t.Fatalf("%s: %v", c.ID, err)
			}
			out = append(out, calibration.Prediction{Kind: q.Kind, Dist: o.Dist, Expected: c.Expected[i], Options: len(q.Options)})
		}
	}
	return out
}

// raw are the classifier's own predictions of cs, before serving.
func raw(t *testing.T, m *Model, cs []cases.Case) []calibration.Prediction {
	t.Helper()
	exs, err := examples(cs)
	if err != nil {
		t.Fatal(err)
	}
	var out []calibration.Prediction
	for _, e := range exs {
		c := m.Classifier(e.options)
		if c == nil {
			t.Fatalf("no classifier for %q", e.signature)
		}
		lp := c.LogProbs(e.state)
		d := make(decision.Distribution, len(lp))
		for i, v := range lp {
			d[i] = math.Exp(v)
		}
		kind := decision.Choice
		if len(e.options) == 2 && e.options[0] == "true" {
			kind = decision.Noul
		}
		out = append(out, calibration.Prediction{Kind: kind, Dist: d, Expected: e.expected, Options: len(e.options)})
	}
	return out
}

// On held-out cases of each set the classifier is right far more often
// than the majority class and less often than always; served through the
// fake engine and read by system1, the same answers come with inflated
// confidence, which a temperature fit sees.
func TestHeldOutAccuracyIsRealButImperfect(t *testing.T) {
	for _, s := range sets {
		t.Run(s.file, func(t *testing.T) {
			train, held := Split(sharedCases(t, s.file), 0.3)
			m, err := Train(train, Options{Temperature: 0.5, FirstBias: 1})
			if err != nil {
				t.Fatal(err)
			}
			own := fitting.Measure(raw(t, m, held))
			served := fitting.Measure(ask(t, serve(t, m), held))
			fit, err := fitting.FitTemperature(ask(t, serve(t, m), held))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: train %d, held out %d; classifier accuracy %.3f ECE %.3f NLL %.3f; served accuracy %.3f ECE %.3f NLL %.3f; temperature fitted on served %.2f",
				s.file, len(train), len(held), own.Accuracy, own.ECE, own.NLL, served.Accuracy, served.ECE, served.NLL, fit)
			if !(own.Accuracy > s.floor+0.1) || !(own.Accuracy < 0.97) {
				t.Errorf("held-out accuracy %.3f: want real (over the %.3f floor by 0.1) but imperfect (< 0.97)", own.Accuracy, s.floor)
			}
			if !(served.ECE > own.ECE) || !(served.NLL > own.NLL) {
				t.Errorf("serving at temperature 0.5 did not make it over-confident: ECE %.3f -> %.3f, NLL %.3f -> %.3f", own.ECE, served.ECE, own.NLL, served.NLL)
			}
			if !(fit > 1.3) {
				t.Errorf("temperature fitted on what was served %.2f: want > 1.3 to undo the over-confidence", fit)
			}
		})
	}
}

// What system1 reads from the engine is the classifier's distribution
// with the known bias on the first label and the known temperature, to
// the precision of the wire: T*(ln p_i - ln p_j) = s_i - s_j + bias*([i=0]-[j=0]).
func TestServedCarriesTheTemperatureAndFirstLabelBias(t *testing.T) {
	train, held := Split(sharedCases(t, "banking12-train-sample.jsonl"), 0.3)
	const temp, bias = 0.4, 1.25
	m, err := Train(train, Options{Temperature: temp, FirstBias: bias})
	if err != nil {
		t.Fatal(err)
	}
	e := serve(t, m)
	exs, err := examples(held[:40])
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range held[:40] {
		q := c.Request.Questions[0]
		o, err := engine.Ask(context.Background(), e, fakeengine.DefaultModel, c.Request.State, q)
		if err != nil {
			t.Fatal(err)
		}
		s := m.Classifier(exs[i].options).LogProbs(exs[i].state)
		if math.Abs(o.Mass-DefaultMass) > 1e-6 {
			t.Errorf("%s: label mass %v, want %v", c.ID, o.Mass, DefaultMass)
		}
		for j := 1; j < len(s); j++ {
			got := temp * (math.Log(o.Dist[0]) - math.Log(o.Dist[j]))
			want := s[0] - s[j] + bias
			if math.Abs(got-want) > 1e-6 {
				t.Fatalf("%s option %d: T*(ln p0 - ln pj) = %v, want %v", c.ID, j, got, want)
			}
			if j > 1 {
				if got, want := temp*(math.Log(o.Dist[1])-math.Log(o.Dist[j])), s[1]-s[j]; math.Abs(got-want) > 1e-6 {
					t.Fatalf("%s option %d: no bias between later options: %v, want %v", c.ID, j, got, want)
				}
			}
		}
	}
	// The bias shows in the answers where the classifier is less sure
	// (AG News): the first option is picked more often than with none,
	// and more often than it is right.
	train, held = Split(sharedCases(t, "agnews-dev.jsonl"), 0.3)
	if m, err = Train(train, Options{Temperature: temp, FirstBias: bias}); err != nil {
		t.Fatal(err)
	}
	e = serve(t, m)
	unbiased := *m
	unbiased.FirstBias = 0
	firsts := func(ps []calibration.Prediction) (picked, right int) {
		for _, p := range ps {
			if p.Predicted() == 0 {
				picked++
			}
			if p.Expected == 0 {
				right++
			}
		}
		return
	}
	withBias, right := firsts(ask(t, e, held))
	without, _ := firsts(ask(t, serve(t, &unbiased), held))
	t.Logf("first option picked %d times with the bias, %d without; right %d of %d", withBias, without, right, len(held))
	if !(withBias > without) || !(withBias > right) {
		t.Errorf("first option picked %d times with the bias, %d without, right %d times", withBias, without, right)
	}
}

// A question the model was not trained for gets no label at all, so
// system1 reports that the engine did not answer instead of reading a
// made-up distribution.
func TestUnknownQuestionIsNotAnswered(t *testing.T) {
	train, _ := Split(sharedCases(t, "sst2-dev.jsonl"), 0.3)
	m, err := Train(train[:50], Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := sharedCases(t, "agnews-dev.jsonl")[0]
	_, err = engine.Ask(context.Background(), serve(t, m), fakeengine.DefaultModel, other.Request.State, other.Request.Questions[0])
	if err == nil {
		t.Fatal("an unknown question was answered")
	}
	if _, err := Train(nil, Options{}); err == nil {
		t.Fatal("trained on nothing")
	}
}

func TestSplitIsStableByID(t *testing.T) {
	cs := sharedCases(t, "banking12-train-sample.jsonl")
	train, held := Split(cs, 0.3)
	if len(train)+len(held) != len(cs) || len(held) < 140 || len(held) > 220 {
		t.Fatalf("split %d/%d of %d", len(train), len(held), len(cs))
	}
	_, again := Split(cs[100:], 0.3)
	in := map[string]bool{}
	for _, c := range held {
		in[c.ID] = true
	}
	for _, c := range again {
		if !in[c.ID] {
			t.Fatalf("%s changed sides when other cases were left out", c.ID)
		}
	}
}

// BenchmarkServedQuestion is one banking12 question answered by the
// simulated model through the fake llama.cpp engine and system1's client:
// what a benchmark of the calibration loop pays per question.
func BenchmarkServedQuestion(b *testing.B) {
	m, held := trained(b, "banking12-train-sample.jsonl")
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: m.Behavior()})
	defer f.Close()
	e := &llamacpp.Engine{BaseURL: f.URL}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := held[i%len(held)]
		i++
		if _, err := engine.Ask(context.Background(), e, fakeengine.DefaultModel, c.Request.State, c.Request.Questions[0]); err != nil {
			b.Fatal(err)
		}
	}
}
