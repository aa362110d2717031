package answer

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/decisionlog"
)

// ShadowRule asks a sampled Share of the requests for Model of Candidate
// too: another model, or an alias naming one.
type ShadowRule struct {
	Model, Candidate string
	// Share is the probability a request is shadowed, in (0, 1].
	Share float64
}

// Defaults of a Shadow.
const (
	// DefaultShadowQueue is how many shadowed requests may wait for a
	// worker; more are dropped and counted.
	DefaultShadowQueue = 256
	// DefaultShadowWorkers is how many ask candidates at once.
	DefaultShadowWorkers = 2
	// DefaultShadowTimeout bounds one shadowed request.
	DefaultShadowTimeout = 30 * time.Second
)

// ShadowOptions configure a Shadow.
type ShadowOptions struct {
	Rules []ShadowRule
	// Queue, Workers and Timeout are 0 for their defaults.
	Queue   int
	Workers int
	Timeout time.Duration
	// Sample returns a number in [0, 1) for each request offered; nil is
	// math/rand/v2's Float64.
	Sample func() float64
	Log    *slog.Logger
}

// ShadowStats are a Shadow's counts since it started.
type ShadowStats struct {
	// Sampled requests were drawn for shadowing; each is then Dropped
	// (the queue was full, or the shadow closed before the candidate
	// answered), Failed (the candidate
	// did not answer every question) or Asked (answered and recorded).
	Sampled, Dropped, Failed, Asked uint64
	// Queued is how many wait for a worker now.
	Queued int
}

// Shadow asks candidates the requests sampled from live traffic, off the
// request path: Service.Answer only draws and puts a request on a bounded
// queue, never waiting on it; workers ask the candidate and record its
// answer in the decision log under the face decisionlog.FaceShadow and
// the request id decisionlog.ShadowRequestID of the one served. A nil
// *Shadow shadows nothing.
type Shadow struct {
	rules   map[string]ShadowRule
	jobs    chan shadowJob
	timeout time.Duration
	sample  func() float64
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.RWMutex // held to read closed and to send, so Close does not race a send
	closed bool

	sampled, dropped, failed, asked atomic.Uint64
}

type shadowJob struct {
	svc  *Service
	req  Request
	rule ShadowRule
}

// NewShadow starts a Shadow's workers; Close stops them.
func NewShadow(o ShadowOptions) *Shadow {
	o.Queue = cmp.Or(max(o.Queue, 0), DefaultShadowQueue)
	o.Workers = cmp.Or(max(o.Workers, 0), DefaultShadowWorkers)
	o.Timeout = cmp.Or(max(o.Timeout, 0), DefaultShadowTimeout)
	if o.Sample == nil {
		o.Sample = rand.Float64
	}
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	s := &Shadow{rules: map[string]ShadowRule{}, jobs: make(chan shadowJob, o.Queue), timeout: o.Timeout, sample: o.Sample, log: o.Log}
	for _, r := range o.Rules {
		s.rules[r.Model] = r
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for range o.Workers {
		s.wg.Go(s.work)
	}
	return s
}

// Stats are the counts so far.
func (s *Shadow) Stats() ShadowStats {
	if s == nil {
		return ShadowStats{}
	}
	return ShadowStats{Sampled: s.sampled.Load(), Dropped: s.dropped.Load(), Failed: s.failed.Load(), Asked: s.asked.Load(), Queued: len(s.jobs)}
}

// Close stops taking requests, cancels the ones being asked and waits
// for the workers; what is queued is dropped and counted.
func (s *Shadow) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.jobs)
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// offer draws whether req, answered by svc as a, is shadowed and, if it
// is, queues it without waiting. It never blocks the caller.
func (s *Shadow) offer(svc *Service, req Request, a *Answer) {
	if s == nil || req.Face == decisionlog.FaceShadow {
		return
	}
	rule, ok := s.rules[req.Model]
	if !ok && a != nil {
		rule, ok = s.rules[a.Model]
	}
	if !ok || !(s.sample() < rule.Share) {
		return
	}
	s.sampled.Add(1)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.dropped.Add(1)
		return
	}
	select {
	case s.jobs <- shadowJob{svc: svc, req: req, rule: rule}:
	default:
		s.dropped.Add(1)
	}
}

func (s *Shadow) work() {
	for j := range s.jobs {
		if s.ctx.Err() != nil {
			s.dropped.Add(1)
			continue
		}
		s.ask(j)
	}
}

// ask asks the candidate j's request by the answer path's own steps,
// checks included (Service.ask), and records its answer as the answer
// path records any, with the shadow's face and request id.
func (s *Shadow) ask(j shadowJob) {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	req := j.req
	req.Model = j.rule.Candidate
	req.Face = decisionlog.FaceShadow
	req.RequestID = decisionlog.ShadowRequestID(j.req.RequestID)
	req.Start = time.Now()
	req.Provider = "" // a chain link's fits were learnt on its own model, not the candidate
	req.Key = ""      // the operator's trial, not the caller's spend
	a, err := j.svc.ask(ctx, j.svc.fleet, req, j.svc.Fits())
	if err != nil && s.ctx.Err() != nil {
		s.dropped.Add(1) // closing, not the candidate's failure
		return
	}
	if err != nil {
		s.failed.Add(1)
		s.log.Warn("shadow: the candidate did not answer", "request_id", j.req.RequestID, "model", j.rule.Model, "candidate", j.rule.Candidate, "err", err)
		return
	}
	j.svc.record(req, a)
	s.asked.Add(1)
}
