package llamacpp

import "time"

// holdCalls keeps the reads of key waiting, as if calls of theirs were
// out, until post sends them; waiting is how many wait. It first waits
// for the key's last poster to end, which would post them.
func (e *Engine) holdCalls(key callKey) (waiting func() int, post func()) {
	for {
		e.mu.Lock()
		q := entry(&e.queues, key)
		if q.posters == 0 {
			q.posters = 1 << 30 // none posts
			e.mu.Unlock()
			break
		}
		e.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	waiting = func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(entry(&e.queues, key).waiting)
	}
	return waiting, func() {
		e.mu.Lock()
		q := entry(&e.queues, key)
		q.posters = 1 // this one
		e.mu.Unlock()
		for e.postNext(key, q) {
		}
	}
}
