package calibration

import (
	"math"
	"slices"

	"system1/internal/decision"
)

// MethodLevel is a temperature for scores that keeps each answer's
// expected level: p_i proportional to p_i^(1/T) e^(lambda i), lambda
// chosen per answer so that sum(i p_i) is what it was. A score's answer
// is its expected level, and a plain temperature moves it toward the
// middle of the scale, which can cost accuracy and MAE (on SST-5 as the
// simulated model answers it, a temperature of 20 took accuracy from
// 0.254 to 0.221): this one sharpens or flattens the distribution
// around the answer and leaves the answer, its accuracy and its MAE
// exactly as they were. It applies to scores only; fitting.Select tries it on
// score buckets alone.
const MethodLevel = "level"

// levelLambda finds lambda for which q tilted by e^(lambda i) has the
// expected level target, by Newton's method on a bracket that bisection
// keeps (the tilted mean increases with lambda, its derivative the
// tilted variance). logs are ln q_i, -Inf where q_i is 0.
func levelLambda(logs []float64, target float64) float64 {
	// The bracket spans the spread of the logs as well: a sharp
	// temperature spreads them by hundreds of nats (0.99 and 0.01 at
	// T = 0.05 by 92), and a tilt that must undo that to keep the level
	// goes as far beyond 60.
	spread := 0.0
	if top, bottom := slices.Max(logs), finiteMin(logs); !math.IsInf(bottom, 0) {
		spread = top - bottom
	}
	lo, hi := -60-spread, 60+spread
	lambda := 0.0
	w := make([]float64, len(logs))
	for range 100 {
		top := math.Inf(-1)
		for i, l := range logs {
			w[i] = l + lambda*float64(i)
			top = math.Max(top, w[i])
		}
		var s, m, m2 float64
		for i := range w {
			e := math.Exp(w[i] - top)
			s += e
			m += e * float64(i)
			m2 += e * float64(i) * float64(i)
		}
		m, m2 = m/s, m2/s
		f := m - target
		if math.Abs(f) < 1e-12 {
			return lambda
		}
		if f > 0 {
			hi = lambda
		} else {
			lo = lambda
		}
		next := lambda - f/math.Max(m2-m*m, 1e-300)
		if !(next > lo && next < hi) {
			next = (lo + hi) / 2
		}
		if hi-lo < 1e-12 {
			return next
		}
		lambda = next
	}
	return lambda
}

// finiteMin is the least finite value of xs, +Inf when none is.
func finiteMin(xs []float64) float64 {
	m := math.Inf(1)
	for _, x := range xs {
		if !math.IsInf(x, 0) && x < m {
			m = x
		}
	}
	return m
}

// applyLevel is MethodLevel at temperature t on d, which passes Check.
// The tempered log-probabilities are tilted as they are, never through
// the tempered distribution: at a sharp temperature that one underflows
// to a single option, and the expected level would move to it.
func applyLevel(d decision.Distribution, t float64) decision.Distribution {
	logs := make([]float64, len(d))
	nonzero := 0
	for i, p := range d {
		logs[i] = math.Log(p) / t // -Inf where p is 0
		if p > 0 {
			nonzero++
		}
	}
	if nonzero < 2 {
		return d.Temper(t)
	}
	return tilt(logs, levelLambda(logs, decision.ExpectedLevel(d)))
}

// tilt is the distribution of log-probabilities logs (-Inf: none) tilted
// by lambda per level, exp(logs[i] + lambda*i) normalised to sum to 1.
func tilt(logs []float64, lambda float64) decision.Distribution {
	z := make([]float64, len(logs))
	for i, l := range logs {
		z[i] = l + lambda*float64(i)
	}
	return softmax(z)
}
