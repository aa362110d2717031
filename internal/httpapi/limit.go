package httpapi

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter holds a token bucket per caller. Buckets of callers idle for a
// while are dropped, so that client addresses cannot grow it without
// bound.
type limiter struct {
	every rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

const idleBucket = 10 * time.Minute

func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	return &limiter{every: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[string]*bucket{}}
}

// allow takes a token for caller, or says how long until one is free.
func (l *limiter) allow(caller string, now time.Time) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > idleBucket {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > idleBucket {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[caller]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.every, l.burst)}
		l.buckets[caller] = b
	}
	b.seen = now
	res := b.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// retryAfterSeconds rounds a wait up to whole seconds for Retry-After.
func retryAfterSeconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }
