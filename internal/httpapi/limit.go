package httpapi

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter holds a token bucket per caller. Buckets of callers idle for a
// while are dropped, and there are at most maxBuckets of them: callers
// past that share one overflow bucket, so that a flood of client
// addresses can neither grow the map without bound nor get a fresh
// allowance each.
type limiter struct {
	every rate.Limit
	burst int

	mu       sync.Mutex
	buckets  map[string]*bucket
	overflow *bucket
	swept    time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

const (
	idleBucket = 10 * time.Minute
	maxBuckets = 10000
)

func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	l := &limiter{every: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[string]*bucket{}}
	l.overflow = &bucket{lim: rate.NewLimiter(l.every, l.burst)}
	return l
}

// bucket finds or makes caller's bucket; l.mu is held.
func (l *limiter) bucket(caller string, now time.Time) *bucket {
	if b, ok := l.buckets[caller]; ok {
		b.seen = now
		return b
	}
	// Full, it sweeps at most once a second: a flood of new addresses
	// must not make every request walk the whole map.
	if now.Sub(l.swept) > idleBucket || (len(l.buckets) >= maxBuckets && now.Sub(l.swept) > time.Second) {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > idleBucket {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	if len(l.buckets) >= maxBuckets {
		return l.overflow
	}
	b := &bucket{lim: rate.NewLimiter(l.every, l.burst), seen: now}
	l.buckets[caller] = b
	return b
}

// allow takes a token for caller, or says how long until one is free.
func (l *limiter) allow(caller string, now time.Time) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	res := l.bucket(caller, now).lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// charge takes n more tokens for caller, into debt if it must: a request
// that turned out to be worth n more (a batch of states) makes the
// caller's next requests wait as long as n requests would have. Never
// more than the burst is reserved at once, which a reservation cannot
// exceed.
func (l *limiter) charge(caller string, n int, now time.Time) {
	if l == nil || n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(caller, now)
	for n > 0 {
		k := min(n, l.burst)
		b.lim.ReserveN(now, k)
		n -= k
	}
}

// attempt checks caller's allowance of authentication failures before its
// key is compared. While the caller is out of tokens, ok is false with
// the wait, and the attempt must be refused without looking at its key.
// Otherwise the attempt goes ahead, and failed takes a token when the key
// was wrong, so that only wrong keys use the allowance up. failed may
// take the bucket into debt: guesses sent at once, which all found a
// token, lengthen the wait by as much as they overdrew.
func (l *limiter) attempt(caller string, now time.Time) (failed func(), ok bool, wait time.Duration) {
	if l == nil {
		return func() {}, true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(caller, now)
	if tokens := b.lim.TokensAt(now); tokens < 1 {
		return nil, false, time.Duration((1 - tokens) / float64(l.every) * float64(time.Second))
	}
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		b.lim.ReserveN(time.Now(), 1)
	}, true, 0
}

// clientKey is the address a caller is limited by: its IP, or its /64
// for IPv6, since one host commonly holds a whole /64.
func clientKey(remoteAddr string) string {
	h, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		h = remoteAddr
	}
	ip := net.ParseIP(h)
	if ip == nil || ip.To4() != nil {
		return h
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
