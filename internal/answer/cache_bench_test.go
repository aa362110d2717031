package answer_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"system1/internal/answer"
)

// BenchmarkCache is one request of two questions on the fake llama.cpp
// engine over loopback HTTP: answered from the cache (hit), asked of the
// engine with the cache on and kept (miss: a new state each time), and
// asked with no cache (off). The ratio hit/miss is what a repeat saves
// on an engine that answers at once; a real engine's time is added to
// miss and off only.
//
//	go test -run '^$' -bench Cache -benchmem ./internal/answer
func BenchmarkCache(b *testing.B) {
	for _, c := range []struct {
		name    string
		entries int
		repeat  bool
	}{
		{"hit", 1 << 16, true},
		{"miss", 1 << 16, false},
		{"off", 0, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			svc, _, _ := cachedService(b, c.entries, time.Hour, nil)
			req := twoQuestions("m")
			ask(b, svc, req)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !c.repeat {
					i++
					req.State = json.RawMessage(strconv.Quote("about red " + strconv.Itoa(i)))
				}
				a, err := svc.Answer(b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				if c.repeat && a.Cache != answer.CacheHit {
					b.Fatalf("cache %q", a.Cache)
				}
			}
		})
	}
}
