// Package retryafter reads how long a server asked to be left alone.
package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// Parse reads retry-after-ms, else Retry-After in seconds or as an HTTP
// date; 0 when there is none.
func Parse(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return duration(ms, time.Millisecond)
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return duration(s, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// duration is n units, held at the longest time.Duration past it: a
// conversion out of range (1e10 seconds, Inf) gives a negative one.
func duration(n float64, unit time.Duration) time.Duration {
	if d := n * float64(unit); d < math.MaxInt64 {
		return time.Duration(d)
	}
	return math.MaxInt64
}
