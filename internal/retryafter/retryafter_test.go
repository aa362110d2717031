package retryafter

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "3"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(10 * time.Second).Format(http.TimeFormat)}, 10 * time.Second},
		{map[string]string{"Retry-After": "soon"}, 0},
		// Past what a time.Duration holds: the longest one, never a
		// negative one from an overflow.
		{map[string]string{"Retry-After": "1e10"}, math.MaxInt64},
		{map[string]string{"Retry-After": "Inf"}, math.MaxInt64},
		{map[string]string{"Retry-After-Ms": "1e16"}, math.MaxInt64},
		{map[string]string{"Retry-After": "NaN"}, 0},
		{nil, 0},
	} {
		h := http.Header{}
		for k, v := range tc.h {
			h.Set(k, v)
		}
		if got := Parse(h, now); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.h, got, tc.want)
		}
	}
}
