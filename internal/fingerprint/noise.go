package fingerprint

import (
	"math"
)

// FalseAlarm is the chance that a canary read of an unchanged build is
// taken for a change, once the node's repeat noise is measured: 1e-6 a
// canary, at the default canary_every (10 minutes) one false alarm in
// about 19 years per (node, model), if the noise is as measured
// (docs/fingerprints.md).
const FalseAlarm = 1e-6

// NoiseFloor is the smallest repeat noise the test assumes, as a standard
// deviation of a value's log-probability between two reads: a build read
// bit-identically (the CPU engines' cold reads) measures 0, and a move of
// 2e-4 in log-probability (1e-4 in probability at 1/2) is below anything
// a decision or a fit can tell. The CPU engines' batch noise (0.0004 at
// most, docs/fingerprints.md) stays under the test's limit over it, and
// the same weights in F16 instead of F32 (0.0012) above.
const NoiseFloor = 2e-4

// MinNoiseValues is how many repeat differences the noise must be
// measured on before the test replaces the tolerance: one repeat read
// of the canary gives more.
const MinNoiseValues = 20

// minProb is the smallest probability compared in log space: a value
// under it in both reads says nothing, and one under it in a single read
// is compared as if it were minProb.
const minProb = 1e-4

// Noise is a node's repeat noise, measured from its own reads: the sum of
// squares and the count of the differences in log-probability between
// each value of two consecutive reads of one build.
type Noise struct {
	SumSq float64 `json:"sum_sq"`
	N     int     `json:"n"`
}

// Add measures the differences between two reads of one build; readings
// rounded to a step (an upstream's two decimals) are not measured: their
// values move by steps, not noise, and the tolerance holds them.
func (n *Noise) Add(a, b Reading) {
	if a.Step > 0 || b.Step > 0 {
		return
	}
	for _, d := range logDiffs(a, b) {
		n.SumSq += d * d
		n.N++
	}
}

// Measured reports whether enough differences were measured for the
// test.
func (n Noise) Measured() bool { return n.N >= MinNoiseValues }

// Sigma is the standard deviation of a value's difference between two
// reads, at least NoiseFloor.
func (n Noise) Sigma() float64 {
	if n.N == 0 {
		return NoiseFloor
	}
	return max(math.Sqrt(n.SumSq/float64(n.N)), NoiseFloor)
}

// ZLimit is the largest standardised difference among m compared values
// that the test holds to be noise at false-alarm rate alpha: with each
// difference normal with the measured sigma, the chance that any of m
// exceeds it is at most alpha (Bonferroni).
func ZLimit(m int, alpha float64) float64 {
	if m < 1 {
		return math.Inf(1)
	}
	return math.Sqrt2 * math.Erfcinv(alpha/float64(m))
}

// logDiffs are the differences ln a - ln b of every value of the
// questions both readings answered, values under minProb in both left
// out.
func logDiffs(a, b Reading) []float64 {
	if len(a.Dists) != len(b.Dists) {
		return nil
	}
	var out []float64
	for i := range a.Dists {
		da, db := a.Dists[i], b.Dists[i]
		if da == nil || db == nil || len(da) != len(db) {
			continue
		}
		for j := range da {
			if da[j] < minProb && db[j] < minProb {
				continue
			}
			out = append(out, math.Log(max(da[j], minProb))-math.Log(max(db[j], minProb)))
		}
	}
	return out
}

// structural reports whether the readings differ in which questions were
// answered: a question uninformative in one and answered in the other.
func structural(a, b Reading) bool {
	if len(a.Dists) != len(b.Dists) {
		return true
	}
	for i := range a.Dists {
		if (a.Dists[i] == nil) != (b.Dists[i] == nil) || len(a.Dists[i]) != len(b.Dists[i]) {
			return true
		}
	}
	return false
}

// test holds next's canary against ref's with the node's noise, filling
// the change's test fields; it does nothing when either was not read,
// either is rounded, or the noise is not measured yet (the tolerance
// holds them).
func (c *Change) test(ref, next Reading, noise Noise, alpha float64) {
	if !ref.Read() || !next.Read() || ref.Step > 0 || next.Step > 0 || !noise.Measured() {
		return
	}
	c.Tested, c.Structural = true, structural(ref, next)
	diffs := logDiffs(ref, next)
	c.Sigma, c.ZLimit = noise.Sigma(), ZLimit(len(diffs), alpha)
	for _, d := range diffs {
		c.Z = math.Max(c.Z, math.Abs(d)/c.Sigma)
	}
}
