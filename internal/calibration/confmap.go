package calibration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"system1/internal/decision"
)

// MaxMapKnots bounds the knots of a ConfidenceMap, in a fits file and
// from fitting.Select, which keeps evenly spaced ones of a longer fit.
const MaxMapKnots = 128

// ConfidenceMap is a monotone map of the confidence of the predicted
// answer (Prediction.Confidence, on the calibrated distribution) to the
// probability that the answer is right: isotonic regression of
// correctness on confidence. A fit's map is composed after its
// calibrator (Calibrator.Map): the predicted answer is served at the
// mapped probability, the other options share the rest (Apply), and the
// answer is never changed. A gate is chosen on the mapped confidences,
// what decide grades; the map is flat over each of its steps, so such
// a gate falls on a step.
//
// The map is piecewise linear through its knots (X[i], Y[i]) and flat
// beyond the first and the last.
type ConfidenceMap struct {
	// X are the knots' confidences, strictly increasing, in [0, 1].
	X []float64 `json:"x"`
	// Y are the probabilities right at the knots, non-decreasing, in
	// [0, 1].
	Y []float64 `json:"y"`
}

// Map is the probability right of an answer of confidence c: Y
// interpolated linearly between the knots, Y[0] below the first and the
// last Y above the last; a NaN c gets Y[0]. A map without knots leaves c
// as it is. It assumes m passes Check.
func (m ConfidenceMap) Map(c float64) float64 {
	if len(m.X) == 0 {
		return c
	}
	if !(c > m.X[0]) {
		return m.Y[0]
	}
	i, found := slices.BinarySearch(m.X, c)
	switch {
	case found:
		return m.Y[i]
	case i == len(m.X):
		return m.Y[len(m.Y)-1]
	}
	x0, x1, y0, y1 := m.X[i-1], m.X[i], m.Y[i-1], m.Y[i]
	return y0 + (y1-y0)*(c-x0)/(x1-x0)
}

// Check reports what is wrong with m: no knot or more than MaxMapKnots,
// X and Y of different lengths, an X that is not in [0, 1] or not above
// the one before, or a Y that is not in [0, 1] or below the one before.
func (m ConfidenceMap) Check() error {
	switch {
	case len(m.X) == 0:
		return errors.New("no knots")
	case len(m.X) > MaxMapKnots:
		return fmt.Errorf("%d knots; at most %d", len(m.X), MaxMapKnots)
	case len(m.X) != len(m.Y):
		return fmt.Errorf("%d x for %d y", len(m.X), len(m.Y))
	}
	for i := range m.X {
		if !(m.X[i] >= 0 && m.X[i] <= 1) || (i > 0 && !(m.X[i] > m.X[i-1])) {
			return fmt.Errorf("x %d is %v: not in [0, 1] and above the one before", i, m.X[i])
		}
		if !(m.Y[i] >= 0 && m.Y[i] <= 1) || (i > 0 && m.Y[i] < m.Y[i-1]) {
			return fmt.Errorf("y %d is %v: not in [0, 1] and at least the one before", i, m.Y[i])
		}
	}
	return nil
}

// mapMargin is how far above a tie with the runner-up a mapped answer is
// kept, so that the map never changes which option is predicted.
const mapMargin = 1e-9

// Apply gives d's predicted answer (Prediction.Predicted for a question
// of kind) the probability right m maps its confidence to, so that what
// is served is what the map was chosen on: the other options share the
// rest in the proportions they had (a choice, a noul), or, for a score,
// tilted by e^(lambda i) so that the expected level, the score's answer,
// stays where it was. The map never changes the answer: a mapped value
// that would put a choice's runner-up ahead is held just above the tie,
// and one that no tilt of a score's other levels can balance is moved
// toward the confidence it had until one can. A zero stays zero; a d
// whose predicted answer holds all the mass or none of it (a score's
// expected level can fall on a level the engine gave nothing), or that
// is not a distribution over its own length, comes back as it is.
func (m ConfidenceMap) Apply(kind decision.Kind, d decision.Distribution) decision.Distribution {
	if len(m.X) == 0 || d.Check(len(d)) != nil || len(d) < 2 {
		return d
	}
	p := Prediction{Kind: kind, Dist: d, Options: len(d)}
	k := p.Predicted()
	pk := d[k]
	// The rest is summed, not 1 - pk: for a sure answer (pk 1 - 3e-11)
	// the difference is off by a part in a million, and the options
	// scaled by it would not sum to 1.
	rest, second := 0.0, 0.0
	for i, q := range d {
		if i != k {
			rest += q
			second = max(second, q)
		}
	}
	if !(rest > 0) || !(pk > 0) {
		return d
	}
	target := m.Map(pk)
	if kind == decision.Score {
		return mapLevel(d, k, pk, target)
	}
	target = min(max(target, second/(rest+second)+mapMargin), 1)
	out := make(decision.Distribution, len(d))
	for i, q := range d {
		out[i] = q * (1 - target) / rest
	}
	out[k] = target
	return out
}

// mapLevel is Apply for a score whose predicted level k has pk: k gets
// target, the other levels 1 - target, tilted so that the expected level
// stays. Where no tilt can (the levels left cannot reach the mean that
// would need), target is moved toward pk, which always can, as far as
// it must.
func mapLevel(d decision.Distribution, k int, pk, target float64) decision.Distribution {
	e := decision.ExpectedLevel(d)
	logs := make([]float64, len(d))
	lo, hi := len(d), -1
	for i, q := range d {
		logs[i] = math.Inf(-1)
		if i != k && q > 0 {
			logs[i] = math.Log(q)
			lo, hi = min(lo, i), max(hi, i)
		}
	}
	if hi < 0 || lo == hi {
		return d // one other level: only pk keeps the level
	}
	// The other levels must average (e - m k) / (1 - m), strictly inside
	// [lo, hi] with a little room for the tilt to reach it.
	room := 1e-6 * float64(hi-lo)
	ok := func(m float64) bool {
		if !(m < 1) {
			return false
		}
		t := (e - m*float64(k)) / (1 - m)
		return t > float64(lo)+room && t < float64(hi)-room
	}
	if !ok(target) {
		a, b := pk, target // ok(a) holds: d itself averages so
		if !ok(a) {
			return d
		}
		for range 60 {
			mid := (a + b) / 2
			if ok(mid) {
				a = mid
			} else {
				b = mid
			}
		}
		target = a
	}
	out := tilt(logs, levelLambda(logs, (e-target*float64(k))/(1-target)))
	for i := range out {
		out[i] *= 1 - target
	}
	out[k] = target
	return out
}

// key names m in a step's version: the start of a hash of its knots,
// so that two maps are told apart without writing every knot.
func (m ConfidenceMap) key() string {
	var b []byte
	for _, x := range slices.Concat(m.X, m.Y) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%08x", h.Sum64()>>32)
}
