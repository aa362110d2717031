package decision

import (
	"fmt"
	"math"
)

// Answer is what a question's distribution says, as the wire reports it.
type Answer struct {
	Kind Kind
	// Choice is the chosen option's key (choice only).
	Choice string
	// Noul is P(true) (noul only).
	Noul float64
	// Score is the expected level sum(i * p_i) (score only).
	Score float64
	// Confidence is Jev's confidence (choice and score only).
	Confidence float64
	// Probabilities are the reported values, aligned with the question's
	// options (choice and score only).
	Probabilities []float64
}

// NewAnswer derives the answer to q from its distribution d. Places is the
// number of decimals reported (Jev reports 2); a negative value reports
// full precision. Statistics are computed on d before rounding; reported
// probabilities are rounded so that they still sum to 1, and a choice is
// the argmax of what is reported.
func NewAnswer(q Question, d Distribution, places int) (Answer, error) {
	if err := d.Check(len(q.Options)); err != nil {
		return Answer{}, fmt.Errorf("question %s: %w", q.ID, err)
	}
	a := Answer{Kind: q.Kind}
	switch q.Kind {
	case Choice:
		a.Probabilities = Round(d, places)
		a.Choice = q.Options[ReportedArgmax(a.Probabilities, d)].Key
		a.Confidence = roundTo(ChoiceConfidence(d), places)
	case Score:
		a.Probabilities = Round(d, places)
		a.Score = roundTo(ExpectedLevel(d), places)
		a.Confidence = roundTo(ScoreConfidence(d), places)
	case Noul:
		a.Noul = roundTo(clamp(d[0], 1), places)
	default:
		return Answer{}, fmt.Errorf("question %s: unknown kind %q", q.ID, q.Kind)
	}
	return a, nil
}

// ChoiceConfidence is Jev's chance-corrected margin of the most likely
// option, (n*p_max - 1)/(n - 1): 0 for a uniform distribution, 1 for a
// certain one. One option is certain.
func ChoiceConfidence(d Distribution) float64 {
	n := float64(len(d))
	if n <= 1 {
		return 1
	}
	return clamp((n*d[d.Argmax()]-1)/(n-1), 1)
}

// ScoreConfidence is Jev's score confidence: one minus the mean absolute
// distance of the levels from the mode, relative to that of a uniform
// distribution over the k levels, floored at 0. It differs from the choice
// formula when k >= 4 (wire doc section 4, examples T5, T7, T9).
func ScoreConfidence(d Distribution) float64 {
	k := len(d)
	if k <= 1 {
		return 1
	}
	m := float64(d.Argmax())
	var dist, uniform float64
	mid := float64(k-1) / 2
	for i, p := range d {
		dist += p * math.Abs(float64(i)-m)
		uniform += math.Abs(float64(i) - mid)
	}
	uniform /= float64(k)
	return clamp(1-dist/uniform, 1)
}

// ExpectedLevel is sum(i * p_i), which may fall between levels.
func ExpectedLevel(d Distribution) float64 {
	var s float64
	for i, p := range d {
		s += float64(i) * clamp(p, 1)
	}
	return clamp(s, float64(len(d)-1))
}

// Round reports d to the given number of decimals by the largest-remainder
// method, so the reported values still sum to exactly one unit count: each
// value is floored, and the units left over go to the largest remainders
// (the larger probability first on a tie, then the earlier option). A
// negative places returns a clamped copy.
func Round(d Distribution, places int) []float64 {
	out := make([]float64, len(d))
	if places < 0 {
		for i, p := range d {
			out[i] = clamp(p, 1)
		}
		return out
	}
	scale := math.Pow10(places)
	units := make([]int64, len(d))
	rem := make([]float64, len(d))
	var total int64
	for i, p := range d {
		x := clamp(p, 1) * scale
		units[i] = int64(math.Floor(x))
		rem[i] = x - float64(units[i])
		total += units[i]
	}
	for left := int64(scale) - total; left > 0; left-- {
		best := -1
		for i := range d {
			if rem[i] < 0 {
				continue // already given a unit
			}
			if best < 0 || rem[i] > rem[best] || (rem[i] == rem[best] && d[i] > d[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		units[best]++
		rem[best] = -1
	}
	for i, u := range units {
		out[i] = clamp(float64(u)/scale, 1)
	}
	return out
}

// ReportedArgmax is the index of the largest of reported (d as Round
// reports it), ties broken by the unrounded d and then by order, so that
// a choice is always an argmax of what the caller sees.
func ReportedArgmax(reported []float64, d Distribution) int {
	best := 0
	for i := range reported {
		if reported[i] > reported[best] || (reported[i] == reported[best] && d[i] > d[best]) {
			best = i
		}
	}
	return best
}

func roundTo(x float64, places int) float64 {
	if places < 0 {
		return x
	}
	s := math.Pow10(places)
	return math.Round(x*s) / s
}
