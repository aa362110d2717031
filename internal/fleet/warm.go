package fleet

import (
	"sync"
	"time"
)

// warmStates remembers which states each node answered lately, so that
// questions over a state whose prefix the node probably still caches can
// go to it all at once.
type warmStates struct {
	mu    sync.Mutex
	at    map[warmKey]time.Time
	swept time.Time
}

type warmKey struct {
	node  string
	state uint64
}

// Bounds on what is remembered: an engine's prompt cache holds a state
// for minutes at most, and a few thousand states are plenty.
const (
	warmFor   = 2 * time.Minute
	warmLimit = 4096
)

func (w *warmStates) seen(node string, state uint64, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.at[warmKey{node, state}]
	return ok && now.Sub(t) < warmFor
}

func (w *warmStates) add(node string, state uint64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at == nil {
		w.at = map[warmKey]time.Time{}
	}
	if len(w.at) >= warmLimit || now.Sub(w.swept) > warmFor {
		for k, t := range w.at {
			if now.Sub(t) >= warmFor {
				delete(w.at, k)
			}
		}
		if len(w.at) >= warmLimit {
			clear(w.at) // all fresh: start over rather than grow
		}
		w.swept = now
	}
	w.at[warmKey{node, state}] = now
}
