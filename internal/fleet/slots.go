package fleet

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"system1/internal/engine"
)

// slots bound a node's calls in flight. Calls past the bound wait in a
// queue of bounded length for a bounded time; past either the node is
// busy, which sends the call to another node rather than piling up work
// the node cannot do.
type slots struct {
	sem   chan struct{}
	queue int
	wait  time.Duration

	mu               sync.Mutex
	inFlight, queued int
}

func newSlots(inFlight, queue int, wait time.Duration) *slots {
	return &slots{sem: make(chan struct{}, cmp.Or(max(inFlight, 0), DefaultMaxInFlight)),
		queue: cmp.Or(max(queue, 0), DefaultQueue), wait: wait}
}

// acquire takes a slot, waiting in the queue if there is room; release
// gives it back.
func (s *slots) acquire(ctx context.Context) (release func(), err error) {
	select {
	case s.sem <- struct{}{}:
		s.add(1, 0)
		return s.release, nil
	default:
	}
	s.mu.Lock()
	if s.queued >= s.queue {
		s.mu.Unlock()
		return nil, &engine.Failure{Kind: engine.Busy, Err: fmt.Errorf("all its slots are taken (max_inflight %d) and its queue is full (queue %d)", cap(s.sem), s.queue)}
	}
	s.queued++
	s.mu.Unlock()
	timer := time.NewTimer(s.wait)
	defer timer.Stop()
	select {
	case s.sem <- struct{}{}:
		s.add(1, -1)
		return s.release, nil
	case <-timer.C:
		s.add(0, -1)
		return nil, &engine.Failure{Kind: engine.Busy, Err: fmt.Errorf("no slot came free within queue_timeout %s", s.wait)}
	case <-ctx.Done():
		s.add(0, -1)
		return nil, ctx.Err()
	}
}

func (s *slots) release() {
	<-s.sem
	s.add(-1, 0)
}

func (s *slots) add(inFlight, queued int) {
	s.mu.Lock()
	s.inFlight += inFlight
	s.queued += queued
	s.mu.Unlock()
}

// load is the calls in flight and waiting.
func (s *slots) load() (inFlight, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight, s.queued
}

// saturated reports whether every slot is taken.
func (s *slots) saturated() bool {
	in, _ := s.load()
	return in >= cap(s.sem)
}

// gate admits a node's engine calls (engine.Gate): each takes one of
// share, the request's, when there is one, then one of the node's slots,
// waiting in its queue at most queue_timeout; each is bounded by the
// node's timeout once admitted. Slots are taken one call at a time, never
// one while waiting for another, so a question whose rounds wait for
// slots holds none itself and cannot starve its own calls.
type gate struct {
	n     *Node
	share share // nil: no request's share (the constraint probe)
}

var _ engine.Gate = gate{}

func (g gate) Enter(ctx context.Context) (done func(), err error) {
	give := func() {}
	if g.share != nil {
		if give, err = g.share.take(ctx); err != nil {
			return nil, err
		}
	}
	release, err := g.n.slots.acquire(ctx)
	if err != nil {
		give()
		return nil, err
	}
	return func() { release(); give() }, nil
}

func (g gate) Timeout() time.Duration { return g.n.Timeout }

// share bounds the node's slots one request holds at once: half of them,
// at least one, taken per engine call (see gate). A request with many
// questions, or a question with many rounds or orders, then cannot take
// every slot while its calls run: another caller's question finds a free
// slot instead of waiting behind all of them and timing out in the queue.
// The request's own calls past its share wait for it, bounded by the
// request's deadline, not by the node's queue.
type share chan struct{}

func (s *slots) share() share { return make(share, max(1, cap(s.sem)/2)) }

// take holds one of the request's share, returning the function that
// gives it back.
func (sh share) take(ctx context.Context) (done func(), err error) {
	select {
	case sh <- struct{}{}:
		return func() { <-sh }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
