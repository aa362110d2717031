package calibration

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"system1/internal/decision"
)

// MaxMapKnots bounds the knots of a ConfidenceMap, in a fits file and
// from FitConfidenceMap, which keeps evenly spaced ones of a longer fit.
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

// FitConfidenceMap fits a ConfidenceMap to preds: the confidence of each
// case's predicted answer against whether it was right. Pool adjacent
// violators finds the non-decreasing step function of least squares
// (cases of one confidence pooled first); each step's share right is
// then smoothed to (right + 1/2) / (n + 1), so that no step says 0 or 1
// from finite counts (a log-loss of a wrong answer at 1 would be
// infinite), and pooled again, weighted by n + 1, where the smoothing
// broke the order. Each step gives a knot at its lowest and its highest
// confidence. A fit of more than MaxMapKnots knots keeps evenly spaced
// ones, the first and last included: still monotone, a little coarser.
//
// An empty set is ErrNoCases, and a case that fails Prediction.Check an
// error naming its index.
func FitConfidenceMap(preds []Prediction) (ConfidenceMap, error) {
	if len(preds) == 0 {
		return ConfidenceMap{}, ErrNoCases
	}
	conf := make([]float64, len(preds))
	right := make([]bool, len(preds))
	for i, p := range preds {
		if err := p.Check(); err != nil {
			return ConfidenceMap{}, fmt.Errorf("case %d: %w", i, err)
		}
		conf[i], right[i] = p.Confidence(), p.Correct()
	}
	return fitMap(conf, right), nil
}

// mapBlock is a run of cases pooled into one step.
type mapBlock struct {
	lo, hi float64 // the least and greatest confidence
	value  float64 // the pooled value
	weight float64
	n      int
}

// fitMap is FitConfidenceMap on confidences (each in [0, 1]) and
// whether each was right.
func fitMap(conf []float64, right []bool) ConfidenceMap {
	idx := make([]int, len(conf))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(conf[a], conf[b]) })
	var blocks []mapBlock
	for _, i := range idx {
		y := 0.0
		if right[i] {
			y = 1
		}
		if k := len(blocks) - 1; k >= 0 && blocks[k].hi == conf[i] {
			b := &blocks[k]
			b.value = (b.value*b.weight + y) / (b.weight + 1)
			b.weight++
			b.n++
			continue
		}
		blocks = append(blocks, mapBlock{lo: conf[i], hi: conf[i], value: y, weight: 1, n: 1})
	}
	blocks = pav(blocks)
	for i := range blocks {
		b := &blocks[i]
		n := float64(b.n)
		b.value = (b.value*n + 0.5) / (n + 1)
		b.weight = n + 1
	}
	blocks = pav(blocks)
	var m ConfidenceMap
	for _, b := range blocks {
		m.X = append(m.X, b.lo)
		m.Y = append(m.Y, b.value)
		if b.hi > b.lo {
			m.X = append(m.X, b.hi)
			m.Y = append(m.Y, b.value)
		}
	}
	if len(m.X) > MaxMapKnots {
		var x, y []float64
		last := len(m.X) - 1
		for j := range MaxMapKnots {
			i := j * last / (MaxMapKnots - 1)
			x, y = append(x, m.X[i]), append(y, m.Y[i])
		}
		m.X, m.Y = x, y
	}
	// Rounding in the pooling can leave a value a hair below the one
	// before, or outside [0, 1]; Check must hold.
	for i := range m.Y {
		m.Y[i] = min(max(m.Y[i], 0), 1)
		if i > 0 {
			m.Y[i] = math.Max(m.Y[i], m.Y[i-1])
		}
	}
	return m
}

// pav pools adjacent blocks whose values decrease, weighting by weight,
// until the values do not decrease.
func pav(in []mapBlock) []mapBlock {
	out := make([]mapBlock, 0, len(in))
	for _, b := range in {
		out = append(out, b)
		for k := len(out) - 1; k > 0 && out[k-1].value > out[k].value; k-- {
			a, c := out[k-1], out[k]
			w := a.weight + c.weight
			out[k-1] = mapBlock{lo: a.lo, hi: c.hi, value: (a.value*a.weight + c.value*c.weight) / w, weight: w, n: a.n + c.n}
			out = out[:k]
		}
	}
	return out
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
// whose predicted answer holds all the mass, or that is not a
// distribution over its own length, comes back as it is.
func (m ConfidenceMap) Apply(kind decision.Kind, d decision.Distribution) decision.Distribution {
	if len(m.X) == 0 || d.Check(len(d)) != nil || len(d) < 2 {
		return d
	}
	p := Prediction{Kind: kind, Dist: d, Options: len(d)}
	k := p.Predicted()
	pk := d[k]
	rest := 1 - pk
	if !(rest > 0) {
		return d
	}
	target := m.Map(pk)
	if kind == decision.Score {
		return mapLevel(d, k, pk, target)
	}
	second := 0.0
	for i, q := range d {
		if i != k {
			second = max(second, q)
		}
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
	lambda := levelLambda(logs, (e-target*float64(k))/(1-target))
	out := make(decision.Distribution, len(d))
	top := math.Inf(-1)
	for i, l := range logs {
		if !math.IsInf(l, -1) {
			top = math.Max(top, l+lambda*float64(i))
		}
	}
	var s float64
	for i, l := range logs {
		if !math.IsInf(l, -1) {
			out[i] = math.Exp(l + lambda*float64(i) - top)
			s += out[i]
		}
	}
	for i := range out {
		out[i] *= (1 - target) / s
	}
	out[k] = target
	return out
}

// key names m in a step's version: the start of a hash of its knots,
// so that two maps are told apart without writing every knot.
func (m ConfidenceMap) key() string {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range [][]float64{m.X, m.Y} {
		for _, x := range v {
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
			h.Write(b[:])
		}
	}
	return fmt.Sprintf("%08x", h.Sum64()>>32)
}
