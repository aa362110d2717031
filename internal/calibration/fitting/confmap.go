package fitting

import (
	"cmp"
	"math"
	"slices"

	"system1/internal/calibration"
)

// mapBlock is a run of cases pooled into one step.
type mapBlock struct {
	lo, hi float64 // the least and greatest confidence
	value  float64 // the pooled value
	weight float64
	n      int
}

// fitMap fits a ConfidenceMap to cases given by their confidence (each
// in [0, 1]) and whether each was right. Pool adjacent violators finds
// the non-decreasing step function of least squares (cases of one
// confidence pooled first); each step's share right is then smoothed to
// (right + 1/2) / (n + 1), so that no step says 0 or 1 from finite counts
// (a log-loss of a wrong answer at 1 would be infinite), and pooled
// again, weighted by n + 1, where the smoothing broke the order. Each
// step gives a knot at its lowest and its highest confidence. A fit of
// more than MaxMapKnots knots keeps evenly spaced ones, the first and
// last included: still monotone, a little coarser.
func fitMap(conf []float64, right []bool) calibration.ConfidenceMap {
	idx := make([]int, len(conf))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(conf[a], conf[b]) })
	var blocks []mapBlock
	for _, i := range idx {
		y := boolf(right[i])
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
	var m calibration.ConfidenceMap
	for _, b := range blocks {
		m.X = append(m.X, b.lo)
		m.Y = append(m.Y, b.value)
		if b.hi > b.lo {
			m.X = append(m.X, b.hi)
			m.Y = append(m.Y, b.value)
		}
	}
	if len(m.X) > calibration.MaxMapKnots {
		var x, y []float64
		last := len(m.X) - 1
		for j := range calibration.MaxMapKnots {
			i := j * last / (calibration.MaxMapKnots - 1)
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
