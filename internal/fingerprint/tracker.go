package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
)

// Key names what is fingerprinted: one model on one node.
type Key struct{ Node, Model string }

// Build is a build known by its reference: the id it is named by and the
// first observation of it. A Tracker names an observation consistent with
// a known build by that build's id, so that every process that knows the
// build (Learn) names it alike (docs/fingerprints.md, "The same build in
// every process").
type Build struct {
	ID    string `json:"id"`
	Print Print  `json:"print"`
}

// Tracker keeps the reference print of each (node, model) and holds every
// new observation against it, with the tolerance the caller gives for
// that key (a node may have its own) and the repeat noise measured on the
// key's own reads. It names builds from the ones it knows. It is safe for
// concurrent use.
type Tracker struct {
	// NoiseTest holds observations to the key's measured repeat noise
	// as well as to the tolerance (CompareNoise); false, to the tolerance
	// alone, the noise still measured. Set before the first Observe.
	NoiseTest bool

	mu     sync.Mutex
	refs   map[Key]*entry
	builds []Build
	grown  bool // a build was named since Builds
}

// entry is one key's reference, its build's id, how many changes it has
// seen, the repeat noise measured on it and the suspect reads in a row
// since its last unsuspect one.
type entry struct {
	ref     Print
	id      string
	gen     uint64
	noise   Noise
	suspect []Reading
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{refs: map[Key]*entry{}} }

// Observe holds p against k's reference with tolerance tol (<= 0 is
// DefaultTolerance) and the key's repeat noise, as CompareNoise does, and
// returns the change. The caller gives a key the same tolerance each
// time: its node's. The first observation of k becomes its reference and
// is no change. A read that the noise test alone finds moved beyond the
// largest noise measured is suspect (Change.Suspect) and no change until
// Confirm reads in a row are and their pooled test confirms it; a read
// that is not suspect, or a run the pooled test holds to be noise, ends
// the run, and its suspect reads are measured as the node's noise, as it
// is: a busy engine's batch noise is learnt from the reads it moved. A
// change makes p, as it is, the new reference, so that one swap is
// reported once and nothing of the old build is kept for the new one;
// otherwise the reference keeps its first reading, so that a slow drift
// adds up against it instead of following it, and parts it lacked (an
// identity or a canary whose first read failed) are filled from p. The
// noise is the node's, so it is kept across a change.
func (t *Tracker) Observe(k Key, p Print, tol float64) Change {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.refs[k]
	if !ok {
		e = &entry{ref: p}
		t.refs[k] = e
		e.id = t.nameLocked(p, tol, Noise{})
		return Compare(p, p, tol)
	}
	c := CompareNoise(e.ref, p, tol, t.tested(e.noise))
	if c.suspect() {
		e.suspect = append(e.suspect, p.Canary)
		c.Suspect = len(e.suspect)
		if c.Suspect < Confirm {
			c.Changed = false
			return c
		}
		c.confirm(e.ref.Canary, e.suspect, t.tested(e.noise))
		e.suspect = e.suspect[:len(e.suspect)-1] // p is measured below, if it is noise
	}
	switch {
	case c.Changed:
		e.ref = p
		e.gen++
		e.suspect = nil
		e.id = t.nameLocked(p, tol, t.tested(e.noise))
	default:
		had := e.ref.Canary.Read() && e.ref.Identity.Known()
		if e.ref.Canary.Read() && p.Canary.Read() {
			for _, s := range e.suspect {
				e.noise.Add(e.ref.Canary, s)
			}
			e.suspect = nil
			e.noise.Add(e.ref.Canary, p.Canary)
		}
		e.ref = merge(e.ref, p)
		if !had && e.ref.Canary.Read() && e.ref.Identity.Known() {
			e.id = t.nameLocked(e.ref, tol, t.tested(e.noise)) // the part it lacked joined it
		}
	}
	return c
}

// tested is the noise observations are held to: none unless NoiseTest.
func (t *Tracker) tested(n Noise) Noise {
	if !t.NoiseTest {
		return Noise{}
	}
	return n
}

// nameLocked is the id of the build p observes: the first known build
// with the same identity and answered model whose reference p is
// consistent with (no change under tol and the key's noise, as
// CompareNoise holds them: a process's first reading to the tolerance, a
// change seen by the noise test to the noise, so that the build it left
// is not taken again), else a new build named by p.BuildID(tol), or by a
// digest of p's exact reading where that id names another build. The
// caller holds t.mu.
func (t *Tracker) nameLocked(p Print, tol float64, noise Noise) string {
	if p.BuildID(tol) == "" {
		return ""
	}
	for _, b := range t.builds {
		if b.Print.ID() == p.ID() && b.Print.Canary.Read() == p.Canary.Read() && !CompareNoise(b.Print, p, tol, noise).Changed {
			return b.ID
		}
	}
	id := p.BuildID(tol)
	if t.knownLocked(id) {
		h := sha256.New()
		fmt.Fprintf(h, "%s|%v", p.ID(), p.Canary.Dists) // the values in full: another reading is another id
		id = hex.EncodeToString(h.Sum(nil))[:16]
	}
	t.builds = append(t.builds, Build{ID: id, Print: p})
	t.grown = true
	return id
}

func (t *Tracker) knownLocked(id string) bool {
	return slices.ContainsFunc(t.builds, func(b Build) bool { return b.ID == id })
}

// Learn adds builds another process named (a builds file), so that an
// observation consistent with one takes its id. A build whose id is
// already known is skipped, and so is one whose canary is not a reading
// of this canary (a file written by another version, or by hand): it
// would compare with nothing, and so match anything.
func (t *Tracker) Learn(bs []Build) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bs {
		if b.ID == "" || t.knownLocked(b.ID) {
			continue
		}
		if b.Print.Canary.Read() {
			r, err := NewReading(b.Print.Canary.Dists, b.Print.Canary.Model)
			if err != nil {
				continue
			}
			b.Print.Canary = r
		}
		t.builds = append(t.builds, b)
	}
}

// Builds returns the known builds, and whether a build was named since
// the last call: what a builds file should then be written with.
func (t *Tracker) Builds() ([]Build, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	grown := t.grown
	t.grown = false
	return slices.Clone(t.builds), grown
}

// lookup returns a copy of k's entry, if k was observed.
func (t *Tracker) lookup(k Key) (entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.refs[k]; ok {
		return *e, true
	}
	return entry{}, false
}

// ID is the id of the build k's reference is of; "" when k was not
// observed or nothing of it is known.
func (t *Tracker) ID(k Key) string {
	e, _ := t.lookup(k)
	return e.id
}

// Noise is the repeat noise measured on k's reads.
func (t *Tracker) Noise(k Key) Noise {
	e, _ := t.lookup(k)
	return e.noise
}

// Reference returns k's reference print, if k was observed.
func (t *Tracker) Reference(k Key) (Print, bool) {
	e, ok := t.lookup(k)
	return e.ref, ok
}
