package simmodel

import (
	"context"
	"fmt"
	"math"
	"testing"

	"system1/internal/calibration"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
)

// sensitivity is the largest change of any option's probability over
// the cyclic reorderings of q's options, each answered by answer (a
// score's levels stay in order: it is asked as it is).
func sensitivity(q decision.Question, answer func(shifted decision.Question) decision.Distribution) float64 {
	lo, hi := map[string]float64{}, map[string]float64{}
	for k := range q.Options {
		shifted := q
		if q.Kind != decision.Score {
			shifted.Options = append(append([]decision.Option{}, q.Options[k:]...), q.Options[:k]...)
		}
		d := answer(shifted)
		for i, opt := range shifted.Options {
			if l, ok := lo[opt.Key]; !ok || d[i] < l {
				lo[opt.Key] = d[i]
			}
			hi[opt.Key] = max(hi[opt.Key], d[i])
		}
	}
	worst := 0.0
	for k := range lo {
		worst = max(worst, hi[k]-lo[k])
	}
	return worst
}

// orderSensitivity is sensitivity with each reordering asked of the
// engine as a request of its own with orders orders.
func orderSensitivity(t *testing.T, e engine.Engine, c cases.Case, orders int) float64 {
	t.Helper()
	return sensitivity(c.Request.Questions[0], func(shifted decision.Question) decision.Distribution {
		o, err := engine.AskOrders(context.Background(), e, fakeengine.DefaultModel, c.Request.State, shifted, orders)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		return o.Dist
	})
}

// Order debiasing on the simulated model (over-confident, one nat toward
// the first label): accuracy and ECE on held-out cases in their own
// order, and order sensitivity (mean and largest over cases) raw, over 4
// orders (the default) and over every order. Asking every shift makes the
// answer independent of the order the caller gave; the mean over
// shifts also spreads the first-label bias over every option.
func TestDebiasOnSimulatedModel(t *testing.T) {
	for _, s := range sets {
		t.Run(s.file, func(t *testing.T) {
			m, held := trained(t, s.file)
			e := serve(t, m)
			n := len(held[0].Request.Questions[0].Options)
			sens := held[:min(len(held), 40)]
			var raw, all float64
			asked := []int{1, n}
			if n > 4 {
				asked = []int{1, 4, n} // the default, and every order
			}
			for _, orders := range asked {
				var preds []calibration.Prediction
				for _, c := range held {
					q := c.Request.Questions[0]
					o, err := engine.AskOrders(context.Background(), e, fakeengine.DefaultModel, c.Request.State, q, orders)
					if err != nil {
						t.Fatalf("%s: %v", c.ID, err)
					}
					preds = append(preds, calibration.Prediction{Kind: q.Kind, Dist: o.Dist, Expected: c.Expected[0], Options: n})
				}
				met := fitting.Measure(preds)
				var mean, worst float64
				for _, c := range sens {
					v := orderSensitivity(t, e, c, orders)
					mean += v / float64(len(sens))
					worst = max(worst, v)
				}
				name := fmt.Sprintf("permute/%d", min(orders, n))
				if orders == 1 {
					name, raw = "raw", worst
				}
				if orders == n {
					all = worst
				}
				t.Logf("%s (%d options, %d held out): %-10s accuracy %.3f ECE %.3f; order sensitivity over %d cases: mean %.3f, largest %.3f",
					s.file, n, len(held), name, met.Accuracy, met.ECE, len(sens), mean, worst)
			}
			if !(raw > 0.05) {
				t.Errorf("raw order sensitivity at most %.3f: the first-label bias should show", raw)
			}
			if !(all < 1e-9) || math.IsNaN(all) {
				t.Errorf("every shift asked, yet order sensitivity is %v", all)
			}
		})
	}
}
