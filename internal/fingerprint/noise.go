package fingerprint

import (
	"math"
)

// FalseAlarm is the chance that a test of an unchanged build finds it
// moved, once the node's repeat noise is measured, if the noise is as
// measured (docs/fingerprints.md): a Tracker's test of Confirm suspect
// reads pooled, or CompareNoise's of one read.
const FalseAlarm = 1e-6

// Confirm is how many canary reads in a row must each move beyond the
// largest repeat noise measured (suspect) before they are tested as one:
// a change of weights moves every read to a new place, while a busy
// engine's batches move some reads and not the next. The Confirm reads'
// differences are pooled into one test at FalseAlarm, whose limit falls
// with the values compared (ZLimit), so a move too small for one read's
// test is seen in three at no extra cost per canary; a change under the
// tolerance is reported at the Confirm-th canary after it.
const Confirm = 3

// NoiseFloor is the smallest repeat noise the test assumes, as the root
// mean square of the differences of a value's log-probability between a
// read and the reference: a build read bit-identically (the CPU engines'
// quiet reads) measures 0, and the first reads beside other requests
// move by up to 5.4e-4 on llama-server (docs/fingerprints.md), so that
// the first loaded read of a node measured quiet is held to this floor
// and not alarmed on; the same weights in Q8_0 instead of F16 moved by
// 1e-3 or more there.
const NoiseFloor = 5e-4

// minProb is the smallest probability compared in log space: a value
// under it in both reads says nothing, and one under it in a single read
// is compared as if it were minProb.
const minProb = 1e-4

// Noise is a node's repeat noise, measured from its own reads: the
// largest root mean square move (RMS) of a read of an unchanged build
// from its reference, over every such read, reads beside the node's load
// included, and the count of reads measured. The largest, not a mean:
// a busy engine's batches put reads in a few discrete states, and a
// mean over many quiet, identical reads would hide them.
type Noise struct {
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

// Add measures next, a read of the build whose reference is ref; readings
// rounded to a step (an upstream's two decimals) are not measured: their
// values move by steps, not noise, and the tolerance holds them.
func (n *Noise) Add(ref, next Reading) {
	if ref.Step > 0 || next.Step > 0 {
		return
	}
	if d := logDiffs(ref, next); len(d) > 0 {
		n.Max = max(n.Max, rms(d))
		n.N++
	}
}

// NoiseReads is how many reads of an unchanged build are measured before
// the test holds reads to their noise; until then the tolerance alone
// holds them. The largest of fewer reads is too often below the node's
// noise: armed after one, the test alarmed on an unchanged, batch-noisy
// fake engine in 60 of 1,500 runs, at the third read after it; after 3,
// in 2 of 1,500; after 4 or 5, in none of 8,000 each (docs/fingerprints.md).
const NoiseReads = 5

// Measured reports whether NoiseReads reads were measured: the test holds
// reads from then on.
func (n Noise) Measured() bool { return n.N >= NoiseReads }

// Sigma is the noise the test holds a read to: the largest RMS move
// measured, at least NoiseFloor.
func (n Noise) Sigma() float64 { return max(n.Max, NoiseFloor) }

// ZLimit is how many times sigma the RMS of m compared values may reach
// and still be held to be noise at false-alarm rate alpha: with each
// difference normal with standard deviation sigma, m times the squared
// ratio is chi-square with m degrees of freedom, and the limit is the
// square root of its 1-alpha quantile over m (Wilson and Hilferty's
// approximation, within a percent at m >= 10). About 1.61 for the 35
// values at 1e-6.
func ZLimit(m int, alpha float64) float64 {
	if m < 1 {
		return math.Inf(1)
	}
	z := math.Sqrt2 * math.Erfcinv(2*alpha) // the standard normal's 1-alpha quantile
	v := 2 / (9 * float64(m))
	return math.Pow(max(1-v+z*math.Sqrt(v), 0), 1.5)
}

// rms is the root mean square of d.
func rms(d []float64) float64 {
	var s float64
	for _, x := range d {
		s += x * x
	}
	return math.Sqrt(s / float64(len(d)))
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

// isStructural reports whether the readings differ in which questions were
// answered: a question uninformative in one and answered in the other.
func isStructural(a, b Reading) bool {
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

// confirm holds run, the Confirm suspect reads in a row ending with the
// one c compared, against ref as one test: their differences pooled,
// their RMS in units of the noise's Sigma against the limit for as many
// values. The change is confirmed when the pooled move is beyond that
// limit or every read of the run answered other questions than ref.
func (c *Change) confirm(ref Reading, run []Reading, noise Noise) {
	var diffs []float64
	structural := true
	for _, r := range run {
		diffs = append(diffs, logDiffs(ref, r)...)
		structural = structural && isStructural(ref, r)
	}
	c.Structural = structural
	c.hold(diffs, noise)
	c.Changed = c.noiseMoved()
}

// hold fills c's test figures from diffs, the log-probability differences
// compared: their RMS, that in units of the noise's Sigma, and the limit
// for as many values at FalseAlarm.
func (c *Change) hold(diffs []float64, noise Noise) {
	c.Sigma, c.ZLimit = noise.Sigma(), ZLimit(len(diffs), FalseAlarm)
	c.RMS, c.Z = 0, 0
	if len(diffs) > 0 {
		c.RMS = rms(diffs)
		c.Z = c.RMS / c.Sigma
	}
}

// test holds next's canary against ref's with the node's noise, filling
// the change's test fields; it does nothing when either was not read,
// either is rounded, or the noise is not measured yet (the tolerance
// holds them).
func (c *Change) test(ref, next Reading, noise Noise) {
	if !ref.Read() || !next.Read() || ref.Step > 0 || next.Step > 0 || !noise.Measured() {
		return
	}
	c.Tested, c.Structural = true, isStructural(ref, next)
	c.hold(logDiffs(ref, next), noise)
}
