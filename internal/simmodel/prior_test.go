package simmodel

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// priorRouter is system1's router over one fake llama.cpp node serving
// m, with the default prior bounds: a fresh batch estimate and
// content-free cache.
func priorRouter(t *testing.T, m *Model) *fleet.Router {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: m.Behavior()})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "sim", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}},
		func(string) string { return "" }, &http.Client{})
	if err != nil {
		t.Fatal(err)
	}
	return fleet.New([]*fleet.Node{n}, fleet.Options{})
}

// priorMode is one way of asking: a debias and a prior mode.
type priorMode struct{ name, debias, prior string }

var priorModes = []priorMode{
	{"raw", decision.DebiasOff, decision.PriorOff},
	{"permute", decision.DebiasPermute, decision.PriorOff},
	{"prior batch", decision.DebiasOff, decision.PriorBatch},
	{"prior content_free", decision.DebiasOff, decision.PriorContentFree},
	{"permute + batch", decision.DebiasPermute, decision.PriorBatch},
}

// answerAs asks q over c's state through the router as mode and returns
// the reported distribution and its steps.
func answerAs(t *testing.T, r *fleet.Router, c cases.Case, q decision.Question, m priorMode) (decision.Distribution, []string) {
	t.Helper()
	req := decision.Request{Model: fakeengine.DefaultModel, State: c.Request.State, Questions: []decision.Question{q}, Debias: m.debias, Prior: m.prior}
	a, err := answer.New(answer.Options{Router: r}).Answer(context.Background(), answer.Request{Request: req})
	if err != nil {
		t.Fatalf("%s: %v", c.ID, err)
	}
	return a.Questions[0].Dist, decision.StepNames(a.Questions[0].Steps)
}

// stream answers cs in order as m and returns the labelled predictions
// and how many answers the prior step was applied to.
func stream(t *testing.T, r *fleet.Router, cs []cases.Case, m priorMode) ([]calibration.Prediction, int) {
	t.Helper()
	var preds []calibration.Prediction
	corrected := 0
	for _, c := range cs {
		q := c.Request.Questions[0]
		d, steps := answerAs(t, r, c, q, m)
		if slices.ContainsFunc(steps, func(s string) bool { return strings.HasPrefix(s, decision.StepPrior+"=") }) {
			corrected++
		}
		preds = append(preds, calibration.Prediction{Kind: q.Kind, Dist: d, Expected: c.Expected[0], Options: len(q.Options)})
	}
	return preds, corrected
}

// routedSensitivity is sensitivity with each reordering asked through
// the router as m (so the batch estimate it finds is the stream's).
func routedSensitivity(t *testing.T, r *fleet.Router, c cases.Case, m priorMode) float64 {
	t.Helper()
	return sensitivity(c.Request.Questions[0], func(shifted decision.Question) decision.Distribution {
		d, _ := answerAs(t, r, c, shifted, m)
		return d
	})
}

// Prior correction on the simulated model (over-confident, one nat
// toward the first label), side by side with order debiasing: each set's
// held-out cases are answered as one stream in file order through
// system1's router, a fresh one per mode, so the batch estimate warms up
// over the stream's first DefaultPriorMinRequests (32) answers, which go
// uncorrected and are counted; then order sensitivity over the first 40
// held-out cases, every cyclic reordering asked as its own request after
// the stream. Batch calibration removes the average lean toward the
// first label, so it lowers order sensitivity; content-free calibration
// removes what the model gives an empty state, which on this model is
// the first-label bias (exactly: the bias is added to the logits
// whatever the state) plus the classes' training prior.
func TestPriorOnSimulatedModel(t *testing.T) {
	for _, s := range sets {
		t.Run(s.file, func(t *testing.T) {
			m, held := trained(t, s.file)
			n := len(held[0].Request.Questions[0].Options)
			sens := held[:min(len(held), 40)]
			got := map[string]float64{}
			for _, mode := range priorModes {
				r := priorRouter(t, m)
				preds, corrected := stream(t, r, held, mode)
				met := fitting.Measure(preds)
				var mean, worst float64
				for _, c := range sens {
					v := routedSensitivity(t, r, c, mode)
					mean += v / float64(len(sens))
					worst = max(worst, v)
				}
				got[mode.name] = mean
				t.Logf("%s (%d options, %d held out, %d corrected): %-18s accuracy %.3f ECE %.3f; order sensitivity over %d cases: mean %.3f, largest %.3f",
					s.file, n, len(held), corrected, mode.name, met.Accuracy, met.ECE, len(sens), mean, worst)
				if mode.prior == decision.PriorBatch && corrected != len(held)-fleet.DefaultPriorMinRequests {
					t.Errorf("%s: %d of %d answers corrected; want all but the %d of the warm-up", mode.name, corrected, len(held), fleet.DefaultPriorMinRequests)
				}
				if mode.prior == decision.PriorContentFree && corrected != len(held) {
					t.Errorf("%s: %d of %d answers corrected", mode.name, corrected, len(held))
				}
			}
			// Over two and four options the first position's mean is
			// visibly above the others', so batch removes part of the
			// bias; over twelve, the lean is small against the classes'
			// spread and batch changes order sensitivity by less than the
			// table shows to three decimals, so nothing is claimed there.
			if n <= 4 && !(got["prior batch"] < 0.8*got["raw"]) {
				t.Errorf("batch calibration did not lower the mean order sensitivity by a fifth: %.3f raw, %.3f batch", got["raw"], got["prior batch"])
			}
			// The model's bias is the same over an empty state, so the
			// content-free reading divides it out exactly.
			if !(got["prior content_free"] < 1e-9) {
				t.Errorf("content-free calibration left a mean order sensitivity of %v", got["prior content_free"])
			}
		})
	}
}

// Batch calibration assumes the labels of a queue are balanced around
// the model's average answer. A queue skewed by design (nine in ten
// cases of the first class, the rest interleaved) breaks it: the
// estimate learns the skew as if it were bias and divides it out,
// pushing answers toward the rarer classes. Accuracy raw against batch,
// on the stream after its warm-up.
func TestBatchHurtsOnSkewedStream(t *testing.T) {
	for _, s := range sets {
		if s.file == "banking12-train-sample.jsonl" {
			continue // 12 classes of about 15 held-out cases each: too few for a skewed stream
		}
		t.Run(s.file, func(t *testing.T) {
			m, held := trained(t, s.file)
			var major, minor []cases.Case
			for _, c := range held {
				if c.Expected[0] == 0 {
					major = append(major, c)
				} else {
					minor = append(minor, c)
				}
			}
			var skewed []cases.Case
			for i, c := range major {
				skewed = append(skewed, c)
				if i%9 == 8 && len(minor) > 0 {
					skewed, minor = append(skewed, minor[0]), minor[1:]
				}
			}
			acc := map[string]float64{}
			for _, mode := range []priorMode{priorModes[0], priorModes[2]} {
				preds, _ := stream(t, priorRouter(t, m), skewed, mode)
				after := fitting.Measure(preds[fleet.DefaultPriorMinRequests:])
				acc[mode.name] = after.Accuracy
				t.Logf("%s skewed stream (%d cases, %.0f%% of the first class; %d after warm-up): %-12s accuracy %.3f ECE %.3f",
					s.file, len(skewed), 100*float64(len(major))/float64(len(skewed)), len(preds)-fleet.DefaultPriorMinRequests, mode.name, after.Accuracy, after.ECE)
			}
			if !(acc["prior batch"] < acc["raw"]) {
				t.Errorf("on a skewed stream batch calibration did not cost accuracy: %.3f raw, %.3f batch", acc["raw"], acc["prior batch"])
			}
		})
	}
}
