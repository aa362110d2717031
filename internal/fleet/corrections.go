package fleet

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"system1/internal/decision"
	"system1/internal/engine"
)

// Debias is the router's order debiasing, which a request may override
// (decision.Request.Debias).
type Debias struct {
	// Permute asks each question over cyclic shifts of its options and
	// averages the readings (engine.AskOrders).
	Permute bool
	// Orders is the most shifts asked of one question; 0 is
	// decision.DefaultDebiasOrders.
	Orders int
}

// Corrections are what a request's corrections resolve to: its own
// choices (decision.Request.Debias and Prior), else the router's, with
// the defaults filled in. The fleet asks by them and the answer path's
// cache keys on them (Router.Corrections), so that both read a request
// alike.
type Corrections struct {
	// Permute is whether each question is asked over shifts of its
	// options, at most Orders of them.
	Permute bool
	Orders  int
	// Prior is decision.PriorBatch, PriorContentFree or PriorOff.
	Prior string
}

// Corrections resolves req's corrections against the router's settings.
func (r *Router) Corrections(req decision.Request) Corrections {
	return Corrections{Permute: r.debias.permute(req), Orders: r.debias.most(), Prior: r.prior.mode(req)}
}

// permute is whether req is asked over shifts of its options: its own
// choice, else the router's.
func (d Debias) permute(req decision.Request) bool {
	switch req.Debias {
	case decision.DebiasPermute:
		return true
	case decision.DebiasOff:
		return false
	}
	return d.Permute
}

// most is the most shifts asked of one question.
func (d Debias) most() int { return cmp.Or(max(d.Orders, 0), decision.DefaultDebiasOrders) }

// orders is how many orders of q's options a request asks: 1 without
// permutation, else every shift up to the configured number.
func (d Debias) orders(req decision.Request, q decision.Question) int {
	if !d.permute(req) {
		return 1
	}
	return engine.OrderCalls(len(q.Options), d.most())
}

// Prior is the router's prior correction, which a request may override
// (decision.Request.Prior).
type Prior struct {
	// Mode is decision.PriorBatch, decision.PriorContentFree, or off
	// (decision.PriorOff or empty).
	Mode string
	// MinRequests is how many answers of a question's signature batch
	// calibration must have seen before it divides their mean out; 0 is
	// DefaultPriorMinRequests.
	MinRequests int
	// Window is the most recent answers the batch estimate weighs
	// equally: a running mean up to Window answers, then an exponential
	// one with weight 1/Window, so that it follows drift. 0 is
	// DefaultPriorWindow.
	Window int
	// Signatures bounds the batch estimates and the content-free readings
	// kept (each), the least recently used evicted first; 0 is
	// DefaultPriorSignatures.
	Signatures int
}

// The prior correction's defaults.
const (
	DefaultPriorMinRequests = 32
	DefaultPriorWindow      = 256
	DefaultPriorSignatures  = 1024
)

// priors is a router's prior correction: its setting, the batch
// estimates and the content-free readings (by contentFreeKey), all in
// this replica's memory.
type priors struct {
	cfg   Prior
	batch *batchPrior
	free  *lru.Cache[string, decision.Distribution]
}

func newPriors(p Prior) *priors {
	p.MinRequests = cmp.Or(max(p.MinRequests, 0), DefaultPriorMinRequests)
	p.Window = cmp.Or(max(p.Window, 0), DefaultPriorWindow)
	p.Signatures = cmp.Or(max(p.Signatures, 0), DefaultPriorSignatures)
	free, _ := lru.New[string, decision.Distribution](p.Signatures) // it fails only on a size below 1
	return &priors{cfg: p, batch: newBatchPrior(p.Window, p.Signatures), free: free}
}

// mode is the prior correction req asks for: its own, else the router's.
func (p *priors) mode(req decision.Request) string {
	return cmp.Or(req.Prior, p.cfg.Mode, decision.PriorOff)
}

// emptyState is the content-free state: a JSON empty string.
var emptyState = json.RawMessage(`""`)

// contentFreeKey identifies a content-free reading: the model, the
// question's kind, instructions and options (keys, names and texts), and
// the orders asked, since the reading divided out must be taken the way
// the answer was.
func contentFreeKey(model string, q decision.Question, orders int) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(model))
	field([]byte(q.Kind))
	field(q.Instructions)
	field([]byte(fmt.Sprint(orders)))
	for _, o := range q.Options {
		field([]byte(o.Key))
		field([]byte(o.Name))
		field(o.Text)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// needsContentFree reports whether q of req, asked over orders, needs a
// content-free reading of model on n that is not cached: one asking of q
// more.
func (p *priors) needsContentFree(n *Node, model string, req decision.Request, q decision.Question, orders int) bool {
	if p.mode(req) != decision.PriorContentFree {
		return false
	}
	_, ok := p.free.Get(contentFreeKey(n.priorModel(model), q, orders))
	return !ok
}

// batchSignature is the question a batch estimate is of: the model that
// answered (with the fingerprint of its build: a prior of one build is
// not divided out of another's answers), the kind, the option count, the instructions (hashed), and
// the orders asked, since a mean over debiased answers is not one over
// raw ones.
// It is built by hand into one allocation: it is made for every question
// answered, and fmt took a third of its cost (issue 34).
func batchSignature(model, fingerprint string, q decision.Question, orders int) string {
	h := sha256.Sum256(q.Instructions)
	var buf [160]byte
	b := append(buf[:0], model...)
	b = append(b, 0)
	b = append(b, fingerprint...)
	b = append(b, 0)
	b = append(b, q.Kind...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(len(q.Options)), 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(orders), 10)
	b = append(b, 0)
	b = hex.AppendEncode(b, h[:16])
	return string(b)
}

// observe adds answer a of q to its signature's batch estimate and, when
// req asks for batch calibration and enough answers came before, sets the
// prior to divide out: the estimate of the answers before this one.
func (p *priors) observe(req decision.Request, q decision.Question, a *Answered) {
	orders := max(a.Orders, 1)
	est, seen := p.batch.observe(batchSignature(a.Model, a.Fingerprint, q, orders), a.Dist)
	if p.mode(req) == decision.PriorBatch && seen >= p.cfg.MinRequests {
		a.Prior, a.PriorVersion = est, decision.BatchVersion(seen, p.cfg.Window)
	}
}

// batchPrior is batch calibration's online form (Zhou et al. 2024): per
// question signature, a running estimate of each label position's mean
// probability. It is safe for concurrent use and bounded: a running
// mean over the first window answers, then an exponential one of weight
// 1/window, and at most cap signatures, the least recently used evicted.
type batchPrior struct {
	mu     sync.Mutex
	window int
	sigs   *simplelru.LRU[string, *batchEstimate]
}

type batchEstimate struct {
	seen int
	mean []float64
}

func newBatchPrior(window, signatures int) *batchPrior {
	sigs, _ := simplelru.NewLRU[string, *batchEstimate](max(signatures, 1), nil) // it fails only on a size below 1
	return &batchPrior{window: max(window, 1), sigs: sigs}
}

// observe returns sig's estimate before d and how many answers it is of,
// then adds d. The answer being corrected is left out of the prior
// divided out of it: with it in, a confident answer would partly divide
// itself out (by 1/n of its own weight), so the same reading would be
// corrected differently with few answers than with many, and the first
// answers would be pulled toward uniform by themselves.
func (b *batchPrior) observe(sig string, d decision.Distribution) (decision.Distribution, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.sigs.Get(sig)
	if !ok || len(e.mean) != len(d) {
		e = &batchEstimate{mean: make([]float64, len(d))}
		b.sigs.Add(sig, e)
	}
	var before decision.Distribution
	if e.seen > 0 {
		before = append(decision.Distribution(nil), e.mean...)
	}
	seen := e.seen
	e.seen++
	w := 1 / float64(min(e.seen, b.window))
	for i, p := range d {
		e.mean[i] += w * (p - e.mean[i])
	}
	return before, seen
}

// askContentFree reads q over the empty state the way the answer was
// read (the same orders) unless that reading is cached, and returns it
// with the outcome of the call (zero when cached) for the usage.
func askContentFree(c *caller, e engine.Engine, req decision.Request, j, orders int) (decision.Distribution, engine.Outcome, error) {
	q := req.Questions[j]
	key := contentFreeKey(c.n.priorModel(req.Model), q, orders)
	p := c.r.prior
	if d, ok := p.free.Get(key); ok {
		return d, engine.Outcome{}, nil
	}
	o, err := engine.AskOrders(engine.WithSpread(c.ctx, j), e, req.Model, emptyState, q, orders)
	if f := engine.Classify(err); f != nil {
		g := *f
		g.Err = fmt.Errorf("the content-free reading (prior content_free): %w", f.Err)
		return nil, engine.Outcome{}, &g
	}
	p.free.Add(key, o.Dist)
	return o.Dist, o, nil
}
