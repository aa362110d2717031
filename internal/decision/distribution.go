package decision

import (
	"errors"
	"fmt"
	"math"
)

// Distribution is a probability for each of a question's options, in
// option order.
type Distribution []float64

// sumTolerance is how far from 1 a distribution's sum may drift through
// floating-point arithmetic.
const sumTolerance = 1e-9

// maxLogprob is the largest log-probability accepted from an engine: 0 up
// to the rounding of a float32 softmax.
const maxLogprob = 1e-4

// ErrNoMass means that none of the labels had a probability to renormalise.
var ErrNoMass = errors.New("no label has any probability")

// FromLogprobs renormalises the engine's log-probabilities of each option's
// label over the labels: p_i = exp(lp_i) / sum_j exp(lp_j). A label the
// engine did not report (found[i] false) gets probability 0; the caller
// must flag it, since its true value is unknown, only below the engine's
// cut-off. A log-probability that is NaN, +Inf or above 0 is not a
// log-probability: it is an error, never repaired. -Inf is a masked label
// and gets 0.
func FromLogprobs(lp []float64, found []bool) (Distribution, error) {
	if len(lp) != len(found) {
		return nil, fmt.Errorf("%d logprobs for %d labels", len(lp), len(found))
	}
	top := math.Inf(-1)
	for i, v := range lp {
		if !found[i] {
			continue
		}
		if math.IsNaN(v) || math.IsInf(v, 1) || v > maxLogprob {
			return nil, fmt.Errorf("label %d: %v is not a log-probability", i, v)
		}
		top = math.Max(top, v)
	}
	if math.IsInf(top, -1) {
		return nil, ErrNoMass
	}
	d := make(Distribution, len(lp))
	var sum float64
	for i, v := range lp {
		if found[i] {
			d[i] = math.Exp(v - top) // shifted by the largest: no underflow to all zeros
			sum += d[i]
		}
	}
	for i := range d {
		d[i] /= sum
	}
	return d, nil
}

// Mass is the total raw probability the engine gave the found labels:
// sum exp(lp_i). On an engine that reports values before its constraint it
// says how much of the model's belief fell on the labels at all.
func Mass(lp []float64, found []bool) float64 {
	var m float64
	for i, v := range lp {
		if found[i] {
			m += math.Exp(math.Min(v, 0))
		}
	}
	return clamp(m, 1)
}

// Check reports whether d is a distribution over n options: every value
// finite and in [0,1], summing to 1.
func (d Distribution) Check(n int) error {
	if len(d) != n {
		return fmt.Errorf("%d probabilities for %d options", len(d), n)
	}
	var sum float64
	for i, p := range d {
		if math.IsNaN(p) || math.IsInf(p, 0) || p < 0 || p > 1 {
			return fmt.Errorf("probability %d is %v", i, p)
		}
		sum += p
	}
	if math.Abs(sum-1) > sumTolerance {
		return fmt.Errorf("probabilities sum to %v", sum)
	}
	return nil
}

// Argmax is the index of the largest value, the first on a tie.
func (d Distribution) Argmax() int {
	best := 0
	for i, p := range d {
		if p > d[best] {
			best = i
		}
	}
	return best
}

// Temper applies a calibration temperature: p_i proportional to p_i^(1/T),
// the same as dividing the logits by T. T > 1 flattens, T < 1 sharpens;
// zeros stay zero and the argmax does not move. A temperature that is not a
// positive finite number returns d unchanged.
func (d Distribution) Temper(t float64) Distribution {
	if !(t > 0) || math.IsInf(t, 0) || t == 1 {
		return d
	}
	lp := make([]float64, len(d))
	found := make([]bool, len(d))
	for i, p := range d {
		found[i] = p > 0
		if found[i] {
			lp[i] = math.Log(p) / t
		}
	}
	out, err := FromLogprobs(lp, found)
	if err != nil {
		return d
	}
	return out
}

// MinPrior is the least a prior's entry counts for when it is divided
// out: an option the prior gives (almost) nothing would otherwise take
// every answer that gives it anything.
const MinPrior = 1e-6

// DivideOut removes a label prior: p_i proportional to d_i / prior_i,
// each prior entry at least MinPrior. A prior of another length, or one
// that is not finite, returns d unchanged; so does a division that leaves
// nothing (d zero wherever it is not).
func (d Distribution) DivideOut(prior Distribution) Distribution {
	if len(prior) != len(d) {
		return d
	}
	out := make(Distribution, len(d))
	sum := 0.0
	for i, p := range d {
		q := prior[i]
		if math.IsNaN(q) || math.IsInf(q, 0) {
			return d
		}
		out[i] = p / max(q, MinPrior)
		sum += out[i]
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return d
	}
	for i := range out {
		out[i] = clamp(out[i]/sum, 1)
	}
	return out
}

// clamp is the one place a number is forced into range on its way out of
// the domain: NaN, ±Inf and negatives become 0 and values above hi become
// hi, so that no arithmetic accident can put a non-number in a reply.
func clamp(x, hi float64) float64 {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0) || x < 0:
		return 0
	case x > hi:
		return hi
	}
	return x
}
