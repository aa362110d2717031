// Package fingerprint tells whether the model a node serves under a name
// is still the build it was: the best identity the backend reports of it
// (Ollama's digest, llama.cpp's model file and metadata, vLLM's root, the
// model id an upstream's answers carry) beside a behavioural canary, a few
// fixed questions whose distributions identify the build even when the
// metadata does not change. It is pure: the fleet reads the identity and
// asks the canary, and this package compares.
//
// The rule (docs/fingerprints.md): a (node, model) changed when a field
// of its identity that both observations report differs, when the model id
// its answers carry differs, or when its canary moved further than the
// tolerance from the reference reading or, once the node's repeat noise is
// measured, further than that noise explains (noise.go). Print.ID hashes
// the identity alone; a build's id is named by a Tracker from the builds
// it knows (tracker.go), since a digest of a float reading flips wherever
// a value sits near a bucket's edge.
package fingerprint

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// DefaultTolerance is how far a canary reading may move, in probability
// (Delta), before the build counts as changed. Repeat reads of one build
// on the real llama-server here, across 1 and 4 slots, concurrent load, a
// cold and a warm prompt cache and restarts, moved by at most 0.0004, and
// on Ollama not at all; two builds with other weights of one shape were
// at least 0.11 apart (docs/fingerprints.md has the table and the
// command). The tolerance sits 26 times above the first and 11 times
// below the second. A move below it, such as the 0.001 between one
// model's F32 and F16 weights, is too small to unsettle a calibration
// fit.
const DefaultTolerance = 0.01

// Identity is what a backend reports of the build it serves under a model
// name: fields such as a digest, a model file, a parameter count. Fields
// that change without the build changing (a timestamp, a load time) are
// never in it.
type Identity struct {
	// Source names where the fields were read, such as "ollama
	// /api/tags+/api/version".
	Source string `json:"source"`
	// Fields are the reported values by name. An identity without fields
	// is unknown: the backend offers none, and only the canary and the
	// answered model id speak for the build.
	Fields map[string]string `json:"fields,omitempty"`
}

// Known reports whether the identity has any field.
func (id Identity) Known() bool { return len(id.Fields) > 0 }

// Names returns the field names, sorted: the stable order the identity is
// hashed and shown in.
func (id Identity) Names() []string { return slices.Sorted(maps.Keys(id.Fields)) }

// Print is one observation of a (node, model): its identity and a canary
// reading, either of which may be missing (unknown, or not read).
type Print struct {
	Identity Identity `json:"identity"`
	Canary   Reading  `json:"canary"`
}

// ID is the fingerprint's id: a hash of the identity's source and fields
// in name order, and of the model id the answers carried, as 16 hex
// digits; "" when none of them is known.
func (p Print) ID() string {
	if !p.Identity.Known() && p.Canary.Model == "" {
		return ""
	}
	h := sha256.New()
	write := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) } // length-prefixed: no two field lists hash alike
	write(p.Identity.Source)
	for _, k := range p.Identity.Names() {
		write(k)
		write(p.Identity.Fields[k])
	}
	write(p.Canary.Model)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// BuildID is the id a Tracker gives a build it knows none consistent
// with (Tracker.ID names builds), as 16 hex digits: the identity and
// answered model id (as ID) and the canary's values on a grid of tol
// (<= 0 is DefaultTolerance) plus the reading's rounding step. Two
// readings Compare holds to be a change beyond the tolerance always fall
// in different cells. The converse does not hold: two readings of one
// build may straddle a cell's edge, which is why a Tracker names a
// reading consistent with a known build by that build's id instead.
// "" when nothing of p is known.
func (p Print) BuildID(tol float64) string {
	if !p.Identity.Known() && p.Canary.Model == "" && !p.Canary.Read() {
		return ""
	}
	tol = cmp.Or(max(tol, 0), DefaultTolerance)
	grid := tol + p.Canary.Step
	h := sha256.New()
	fmt.Fprintf(h, "%s|", p.ID())
	for _, d := range p.Canary.Dists {
		if d == nil {
			h.Write([]byte("u|")) // uninformative
			continue
		}
		for _, v := range d {
			fmt.Fprintf(h, "%d,", int64(math.Floor(v/grid)))
		}
		h.Write([]byte("|"))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// AnsweredModel is the name Change.Fields gives the model id the answers
// carried.
const AnsweredModel = "answered_model"

// Change is how an observation differs from the reference.
type Change struct {
	// Changed is set when the build is taken to have changed.
	Changed bool
	// Fields names, sorted, the identity fields whose values differ or
	// that one side reports and the other does not, and AnsweredModel
	// when the answered model id differs.
	Fields []string
	// Delta is the canary's distance from the reference (see Delta);
	// NaN when either was not read.
	Delta float64
	// Tolerance is what Delta was held to: the tolerance, plus the
	// coarser rounding step of the two readings.
	Tolerance float64
	// Was and Now are the identities compared.
	Was, Now Identity
	// Tested is set when the canary was held to the node's measured
	// repeat noise as well as the tolerance (CompareNoise): RMS is the
	// root mean square of the differences of the values' log-probabilities,
	// Z that in units of the noise's Sigma, ZLimit what it may reach at
	// FalseAlarm, and Structural whether a question was answered in one
	// reading and uninformative in the other.
	Tested     bool
	Structural bool
	RMS, Z     float64
	ZLimit     float64
	Sigma      float64
	// Suspect counts the reads in a row, this one included, that moved
	// beyond the largest repeat noise measured, the noise test alone
	// speaking (a Tracker's): under Confirm, the read is no change yet; at
	// Confirm, RMS, Z and ZLimit are the run's pooled test (confirm), and
	// Changed its verdict.
	Suspect int
}

// CanaryMoved reports whether the canary moved beyond the tolerance or,
// once the node's repeat noise is measured, beyond what it explains.
func (c Change) CanaryMoved() bool {
	return c.Delta > c.Tolerance || c.noiseMoved()
}

// noiseMoved reports whether the noise test found the canary moved.
func (c Change) noiseMoved() bool { return c.Tested && (c.Structural || c.Z > c.ZLimit) }

// suspect reports whether the noise test alone found the canary moved
// beyond the largest repeat noise measured (Z > 1, or a question answered
// in one reading alone), with no identity field, answered model or move
// beyond the tolerance to say more.
func (c Change) suspect() bool {
	return c.Tested && len(c.Fields) == 0 && !(c.Delta > c.Tolerance) && (c.Structural || c.Z > 1)
}

// String says what changed, for a log line or an alarm's detail.
func (c Change) String() string {
	if !c.Changed {
		return "unchanged"
	}
	var why []string
	for _, f := range c.Fields {
		switch f {
		case AnsweredModel:
			why = append(why, "the answered model id changed")
		default:
			why = append(why, fmt.Sprintf("%s changed from %q to %q", f, c.Was.Fields[f], c.Now.Fields[f]))
		}
	}
	switch {
	case !c.CanaryMoved():
	case c.Delta > c.Tolerance:
		why = append(why, fmt.Sprintf("the canary moved by %.4g (tolerance %.4g)", c.Delta, c.Tolerance))
	case c.Structural:
		why = append(why, "the canary's questions answered changed")
	default:
		why = append(why, fmt.Sprintf("the canary moved by %.4g (RMS %.2g of log-probability, %.1f times the node's repeat noise %.2g, limit %.2f at false-alarm rate %g)",
			c.Delta, c.RMS, c.Z, c.Sigma, c.ZLimit, FalseAlarm))
	}
	if c.Suspect > 1 {
		why = append(why, fmt.Sprintf("in %d reads in a row", c.Suspect))
	}
	return strings.Join(why, "; ")
}

// Compare holds next against the reference ref with tolerance tol (<= 0
// is DefaultTolerance). Identities are compared only when both are known,
// field by field over the union of their names; answered model ids only
// when both are reported; canaries only when both were read. What one
// side lacks is not a change: a probe that failed says nothing of the
// build.
func Compare(ref, next Print, tol float64) Change { return CompareNoise(ref, next, tol, Noise{}) }

// CompareNoise is Compare with the node's repeat noise: once it is
// measured (Noise.Measured), unrounded canaries are also held to it at
// FalseAlarm, so that a move smaller than the tolerance but far beyond
// the node's noise (the same weights re-quantized) is a change. A move
// beyond the tolerance stays a change whatever the noise: a node whose
// noise reaches it (a GPU's batches) needs a tolerance of its own.
func CompareNoise(ref, next Print, tol float64, noise Noise) Change {
	tol = cmp.Or(max(tol, 0), DefaultTolerance)
	c := Change{Was: ref.Identity, Now: next.Identity, Delta: Delta(ref.Canary, next.Canary)}
	c.Tolerance = tol + math.Max(ref.Canary.Step, next.Canary.Step)
	if ref.Identity.Known() && next.Identity.Known() {
		names := maps.Clone(ref.Identity.Fields)
		maps.Copy(names, next.Identity.Fields)
		for _, k := range slices.Sorted(maps.Keys(names)) {
			a, inA := ref.Identity.Fields[k]
			b, inB := next.Identity.Fields[k]
			if inA != inB || a != b {
				c.Fields = append(c.Fields, k)
			}
		}
	}
	if ref.Canary.Model != "" && next.Canary.Model != "" && ref.Canary.Model != next.Canary.Model {
		c.Fields = append(c.Fields, AnsweredModel)
	}
	c.test(ref.Canary, next.Canary, noise)
	c.Changed = len(c.Fields) > 0 || c.CanaryMoved()
	return c
}

// merge fills what ref lacks from p: the reference's parts stay as first
// seen, and a part first read late (a canary whose first probe failed)
// joins it.
func merge(ref, p Print) Print {
	if !ref.Identity.Known() {
		ref.Identity = p.Identity
	}
	if !ref.Canary.Read() {
		ref.Canary = p.Canary
	} else if ref.Canary.Model == "" {
		ref.Canary.Model = p.Canary.Model
	}
	return ref
}
