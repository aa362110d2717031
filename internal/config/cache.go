package config

import (
	"fmt"
	"time"
)

// MaxCacheEntries bounds cache.entries: each entry holds one request's
// answer (about a kilobyte per question), so more is a mistake, not a
// wish.
const MaxCacheEntries = 10_000_000

// Cache configures the decision cache (see docs/caching.md): exact
// repeats of a request answered from memory, within this process. It is
// off unless Entries is set.
//
//	cache:
//	  entries: 10000   # answers kept, the least recently used evicted first
//	  ttl: 10m         # how long one is kept; 0: until evicted
type Cache struct {
	// Entries is the most answers kept; 0 turns the cache off.
	Entries int `yaml:"entries"`
	// TTL is how long an answer is served after it was made; 0 keeps it
	// until it is evicted.
	TTL Duration `yaml:"ttl"`
}

func (c Cache) check() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Entries < 0 || c.Entries > MaxCacheEntries {
		bad("cache.entries: %d is not 0 (off) or 1..%d", c.Entries, MaxCacheEntries)
	}
	if c.TTL < 0 {
		bad("cache.ttl: %s is negative", time.Duration(c.TTL))
	}
	if c.TTL != 0 && c.Entries == 0 {
		bad("cache.ttl: set, but cache.entries is 0, which turns the cache off; give entries too")
	}
	return errs
}
