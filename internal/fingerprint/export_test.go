package fingerprint

// MinProb is minProb, for the measurements in the external tests, which
// read log-probabilities as the noise test does.
const MinProb = minProb

// Generation counts the changes k has seen since it was first observed:
// 0 for the first build. A fit made while k was at one generation is a fit
// of that build; one recorded at another is not.
func (t *Tracker) Generation(k Key) (gen uint64, ok bool) {
	e, ok := t.lookup(k)
	return e.gen, ok
}

// Forget drops k's reference, generation and noise: its next observation
// starts afresh, as for a node removed from the configuration. The builds
// it named stay known.
func (t *Tracker) Forget(k Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.refs, k)
}
