package llamacpp

// holdCalls keeps the reads of key waiting, as if a call of theirs were
// out, until post sends them; waiting is how many wait.
func (e *Engine) holdCalls(key callKey) (waiting func() int, post func()) {
	e.mu.Lock()
	q := e.queue(key)
	q.posters = 1 << 30 // none posts
	e.mu.Unlock()
	waiting = func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(q.waiting)
	}
	return waiting, func() {
		e.mu.Lock()
		q.posters = 1 // this one
		e.mu.Unlock()
		for e.postNext(key, q) {
		}
	}
}
