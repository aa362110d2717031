package fingerprint

import "sync"

// Key names what is fingerprinted: one model on one node.
type Key struct{ Node, Model string }

// Tracker keeps the reference print of each (node, model) and holds every
// new observation against it, with the tolerance the caller gives for
// that key (a node may have its own). It is safe for concurrent use.
type Tracker struct {
	mu   sync.Mutex
	refs map[Key]*entry
}

// entry is one key's reference and how many changes it has seen.
type entry struct {
	ref Print
	gen uint64
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{refs: map[Key]*entry{}} }

// Observe holds p against k's reference with tolerance tol (<= 0 is
// DefaultTolerance), as Compare does, and returns the change. The caller
// gives a key the same tolerance each time, the one the key's BuildID is
// taken with: its node's. The first observation of k becomes its
// reference and is no change. A change makes
// p, as it is, the new reference, so that one swap is reported once and
// nothing of the old build is kept for the new one; otherwise the
// reference keeps its first reading, so that a slow drift adds up against
// it instead of following it, and parts it lacked (an identity or a
// canary whose first read failed) are filled from p.
func (t *Tracker) Observe(k Key, p Print, tol float64) Change {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.refs[k]
	if !ok {
		t.refs[k] = &entry{ref: p}
		return Compare(p, p, tol)
	}
	c := Compare(e.ref, p, tol)
	if c.Changed {
		e.ref = p
		e.gen++
	} else {
		e.ref = merge(e.ref, p)
	}
	return c
}

// Reference returns k's reference print, if k was observed.
func (t *Tracker) Reference(k Key) (Print, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.refs[k]
	if !ok {
		return Print{}, false
	}
	return e.ref, true
}

// Generation counts the changes k has seen since it was first observed:
// 0 for the first build. A fit made while k was at one generation is a fit
// of that build; one recorded at another is not.
func (t *Tracker) Generation(k Key) (gen uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.refs[k]
	if !ok {
		return 0, false
	}
	return e.gen, true
}

// Forget drops k's reference and generation: its next observation starts
// afresh, as for a node removed from the configuration.
func (t *Tracker) Forget(k Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.refs, k)
}
