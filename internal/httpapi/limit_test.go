package httpapi

import (
	"strconv"
	"testing"
	"time"
)

// The buckets stay bounded: past maxBuckets callers, new ones share the
// overflow bucket, and idle ones are swept.
func TestLimiterIsBounded(t *testing.T) {
	l := newLimiter(1, 1)
	now := time.Unix(1e9, 0)
	for i := range maxBuckets {
		l.allow("addr:"+strconv.Itoa(i), now)
	}
	if ok, _ := l.allow("addr:new", now); !ok {
		t.Error("the overflow bucket had no token for its first caller")
	}
	if ok, _ := l.allow("addr:another", now); ok {
		t.Error("callers past the bound each got their own allowance")
	}
	if len(l.buckets) != maxBuckets {
		t.Errorf("%d buckets after %d callers", len(l.buckets), maxBuckets+2)
	}
	l.allow("addr:late", now.Add(idleBucket+time.Minute))
	if len(l.buckets) != 1 {
		t.Errorf("%d buckets after every caller went idle", len(l.buckets))
	}
}
