package answer

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fleet"
)

// What a request's answer says of the cache (Answer.Cache).
const (
	// CacheHit: the answer is a stored one, made for an earlier request
	// with the same key; no engine was asked.
	CacheHit = "hit"
	// CacheMiss: the fleet answered, and the answer is stored for the
	// repeats.
	CacheMiss = "miss"
	// CacheBypass: the fleet answered and the answer is not stored,
	// because the request divides out the batch prior, a running mean
	// of the answers before it that every answer moves: a repeat is not
	// the same question twice.
	CacheBypass = "bypass"
)

// Cache keeps answers for exact repeats of a request (see docs/caching.md):
// the same state, questions and options, asked of the same model with
// the same steps and fits. It is bounded in entries, the least recently
// used evicted first, and in age. It is safe for concurrent use, and may
// be shared by several Services: the key holds everything an answer
// depends on, the nodes and fits among it.
type Cache struct {
	lru                               *expirable.LRU[key, entry]
	ttl                               time.Duration // how long an entry is served; 0: until evicted
	hits, misses, bypassed, coalesced atomic.Uint64

	// asking are the misses being asked of the fleet now, by key, each
	// with a channel closed when it is done: an identical request that
	// arrives meanwhile waits for that answer instead of asking again.
	mu     sync.Mutex
	asking map[key]chan struct{}
}

// key is a cache key: a SHA-256 of everything an answer depends on.
type key [sha256.Size]byte

// entry is an answer kept (never handed out itself: get replays it), and
// when it was made.
type entry struct {
	answer *Answer
	made   time.Time
}

// minSweep is the least ttl the LRU is given: it sweeps its expired
// entries every 100th of its ttl, so a shorter one would wake it without
// pause (and one under 100ns panics). get holds an entry to the ttl
// asked for itself.
const minSweep = 100 * time.Millisecond

// NewCache returns a cache of at most entries answers, each served for
// ttl after it was made (0: until it is evicted); nil, no cache, when
// entries is not positive.
func NewCache(entries int, ttl time.Duration) *Cache {
	if entries <= 0 {
		return nil
	}
	ttl = max(ttl, 0)
	sweep := ttl
	if ttl > 0 {
		sweep = max(ttl, minSweep)
	}
	return &Cache{lru: expirable.NewLRU[key, entry](entries, nil, sweep), ttl: ttl, asking: map[key]chan struct{}{}}
}

// Hits counts the requests answered from the cache.
func (c *Cache) Hits() uint64 { return c.hits.Load() }

// Misses counts the requests the fleet answered and the cache stored.
func (c *Cache) Misses() uint64 { return c.misses.Load() }

// Bypassed counts the requests the cache did not store (CacheBypass).
func (c *Cache) Bypassed() uint64 { return c.bypassed.Load() }

// Coalesced counts the times a request waited for an identical one being
// asked of the fleet, to be answered from the cache after it.
func (c *Cache) Coalesced() uint64 { return c.coalesced.Load() }

// get returns a copy of the answer stored under k made with fits, if any.
// An answer made with another snapshot of the fits (a reload that kept
// the revision) is not served.
func (c *Cache) get(k key, fits *calibration.Fits) (*Answer, bool) {
	e, ok := c.lru.Get(k)
	if !ok || e.answer.Fits != fits || (c.ttl > 0 && time.Since(e.made) > c.ttl) {
		return nil, false
	}
	return e.answer.replay(), true
}

// ask registers the caller as the one asking the fleet for key k, and
// returns the function to call once its answer is stored or it failed;
// or, when an identical request is being asked already, the channel
// closed when that one is done, to wait on before looking k up again.
func (c *Cache) ask(k key) (done func(), wait <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.asking[k]; ok {
		return nil, ch
	}
	ch := make(chan struct{})
	c.asking[k] = ch
	return func() {
		c.mu.Lock()
		delete(c.asking, k)
		c.mu.Unlock()
		close(ch)
	}, nil
}

// put stores a copy of a under k.
func (c *Cache) put(k key, a *Answer) { c.lru.Add(k, entry{answer: a.clone(), made: time.Now()}) }

// lookup is what the cache makes of a request: its key, and whether the
// answer may be stored at all. ok is false when the request is not
// cached (no cache, or no node serves the model: the fleet says so).
type lookup struct {
	key    key
	bypass bool
	ok     bool
	// content is the hash of everything but the model's identity, which
	// key joins to it: rekey joins the identity as it is later.
	content key
}

// cacheKey builds req's key under fits, read once for the request.
func (s *Service) cacheKey(req Request, fits *calibration.Fits) lookup {
	if s.opt.Cache == nil {
		return lookup{}
	}
	identity, ok := ModelIdentity(s.opt.Router, req.Model)
	if !ok {
		return lookup{}
	}
	corr := s.opt.Router.Corrections(req.Request)
	if corr.Prior == decision.PriorBatch {
		return lookup{ok: true, bypass: true}
	}
	h := newKeyHash()
	h.str("system1 answer cache v1")
	h.str(req.Model)
	h.str(req.Provider)
	// The steps: debias (whether, and how many orders at most), the prior
	// (off or content_free: the reading over an empty state, which does
	// not move), and the fits that temper.
	h.bool(corr.Permute)
	if corr.Permute {
		h.int(corr.Orders)
	}
	h.str(corr.Prior)
	if fits == nil {
		h.str("no fits")
	} else {
		h.str("fits")
		h.int(fits.Version)
		h.str(fits.Revision)
	}
	// The gate: what it refuses is part of the answer stored.
	h.float(req.Gate.MinLabelMass)
	h.bool(req.Gate.None)
	// The prediction sets asked for are part of the answer.
	h.float(req.Coverage)
	h.raw(req.State)
	h.int(len(req.Questions))
	for _, q := range req.Questions {
		h.str(q.ID)
		h.str(string(q.Kind))
		h.raw(q.Instructions)
		h.int(len(q.Options))
		for _, o := range q.Options {
			h.str(o.Key)
			h.str(o.Name)
			h.raw(o.Text)
			h.raw(o.Legend)
		}
	}
	c := lookup{ok: true, content: h.sum()}
	c.key = c.content.with(identity)
	return c
}

// rekey is c with the model's identity as it is now joined to its
// content: after the fleet answered, a build first probed by that very
// request (the faces that probe on use) is known, and the answer is kept
// under the build that served it. c is returned as it was when the model
// is no longer served.
func (s *Service) rekey(req Request, c lookup) lookup {
	if !c.ok || c.bypass {
		return c
	}
	if identity, ok := ModelIdentity(s.opt.Router, req.Model); ok {
		c.key = c.content.with(identity)
	}
	return c
}

// with is the key of content asked of the model whose identity is
// identity (ModelIdentity).
func (content key) with(identity string) key {
	h := newKeyHash()
	h.str(identity)
	h.b = append(h.b, content[:]...)
	return h.sum()
}

// ModelIdentity is the identity part of a cache key: what would answer a
// request for model on r now. Today that is the model the name resolves
// to (through the aliases) and every node that serves it, by name and
// dialect, in configured order, healthy or not: a node that starts or
// stops serving it, or a router held to other nodes (a decide link's),
// changes it. The fingerprint of the build each node serves under that
// name (fleet.Node.Fingerprint) joins it, so that a model swapped under
// the same name changes the key too: an answer of the old build is never
// replayed for the new one. ok is false when no node serves the model.
func ModelIdentity(r *fleet.Router, model string) (id string, ok bool) {
	nodes := r.Serving(model)
	if len(nodes) == 0 {
		return "", false
	}
	b := make([]byte, 0, 64)
	b = strconv.AppendQuote(b, r.Resolve(model))
	for _, n := range nodes {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, n.Name)
		b = append(b, '/')
		b = strconv.AppendQuote(b, n.Dialect)
		b = append(b, '@')
		b = strconv.AppendQuote(b, n.Fingerprint(r.Resolve(model)))
	}
	return string(b), true
}

// keyHash gathers fields, each prefixed with its length so that no two
// sequences of fields write the same bytes, and hashes them at once: a
// hash written field by field cost a cache hit a call and an allocation
// each. The buffer is a pooled one, returned by sum.
type keyHash struct {
	b    []byte
	pool *[]byte
}

// keyBuffers are the buffers of keys being built. One grown past
// maxPooledKey (a large state's) is left to the collector.
var keyBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledKey = 64 << 10

func newKeyHash() keyHash {
	p := keyBuffers.Get().(*[]byte)
	return keyHash{b: (*p)[:0], pool: p}
}

func (k *keyHash) str(s string) {
	k.prefix(0, len(s))
	k.b = append(k.b, s...)
}

// raw writes verbatim JSON, telling absent (nil) from present.
func (k *keyHash) raw(b []byte) {
	if b == nil {
		k.prefix(1, 0)
		return
	}
	k.prefix(2, len(b))
	k.b = append(k.b, b...)
}

// int, float and bool write a number or a flag as its text, as str would.
func (k *keyHash) int(n int) {
	var b [32]byte
	k.text(strconv.AppendInt(b[:0], int64(n), 10))
}

func (k *keyHash) float(f float64) {
	var b [32]byte
	k.text(strconv.AppendFloat(b[:0], f, 'g', -1, 64))
}

func (k *keyHash) bool(v bool) {
	var b [8]byte
	k.text(strconv.AppendBool(b[:0], v))
}

func (k *keyHash) text(t []byte) {
	k.prefix(0, len(t))
	k.b = append(k.b, t...)
}

func (k *keyHash) prefix(tag byte, n int) {
	k.b = append(k.b, tag)
	k.b = binary.BigEndian.AppendUint64(k.b, uint64(n))
}

// sum is the key of the fields written; k is not used after it.
func (k *keyHash) sum() key {
	sum := sha256.Sum256(k.b)
	if cap(k.b) <= maxPooledKey {
		*k.pool = k.b
		keyBuffers.Put(k.pool)
	}
	return sum
}

// clone is a copy of a that shares nothing a caller may change.
func (a *Answer) clone() *Answer {
	out := *a
	out.Questions = make([]Question, len(a.Questions))
	for i, q := range a.Questions {
		q.Dist, q.Engine = slices.Clone(q.Dist), slices.Clone(q.Engine)
		q.Steps = slices.Clone(q.Steps)
		for j := range q.Steps {
			q.Steps[j].Dist = slices.Clone(q.Steps[j].Dist)
		}
		q.Attempts = slices.Clone(q.Attempts)
		if q.Cost != nil {
			c := *q.Cost
			q.Cost = &c
		}
		out.Questions[i] = q
	}
	out.Warnings = slices.Clone(a.Warnings)
	for i := range out.Warnings {
		out.Warnings[i].Missing = slices.Clone(out.Warnings[i].Missing)
	}
	return &out
}

// replay is a stored answer as a hit returns it: a copy, marked a hit,
// that asked no engine, so it made no attempts and used no tokens. Who
// answered (each question's Node and Model) and the steps stay the
// original's.
func (a *Answer) replay() *Answer {
	out := a.clone()
	out.Cache = CacheHit
	out.Usage = Usage{}
	out.Cost = new(decision.USD)
	for i := range out.Questions {
		out.Questions[i].Attempts = nil
		out.Questions[i].Cost = new(decision.USD)
		out.Questions[i].InputTokens, out.Questions[i].OutputTokens = 0, 0
	}
	return out
}
