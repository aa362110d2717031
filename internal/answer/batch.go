package answer

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/engine"
)

// Batch is one set of questions over many states: a face's batch request
// (POST /v1/systemone/batch) or a job's rows.
type Batch struct {
	// Request gives the model, the questions, the corrections asked for
	// and who asks; its State and RequestID are unused, and its Start is
	// when the face received the batch.
	Request
	States []json.RawMessage
	// IDs are the request ids each state's answers are recorded under,
	// aligned with States: one per state, so that feedback names a state's
	// answers as it names a single request's.
	IDs []string
	// Timeout bounds each state's answer from when it is asked, as a
	// request's timeout bounds a single request, and the batch by as many
	// as its states take rounds of asking; 0 leaves both to ctx.
	Timeout time.Duration
}

// AnswerBatch answers b's questions over each of its states exactly as
// Answer answers a request of one state (the budget, the steps, the
// calibration and the record are each state's), fanned out by Each.
// answers and errs are aligned with b.States: each state has its answer
// or its *Failure (of class TimedOut or NoAnswer for a state not asked
// because ctx ended).
func (s *Service) AnswerBatch(ctx context.Context, b Batch) (answers []*Answer, errs []error) {
	n := len(b.States)
	answers, errs = make([]*Answer, n), make([]error, n)
	s.Each(ctx, b.Model, len(b.Questions), n, b.Timeout, func(ctx context.Context, i int) {
		answers[i], errs[i] = s.answerState(ctx, b, i)
	})
	return answers, errs
}

// fanOuts counts the fan-outs (Each) running in this process.
var fanOuts atomic.Int64

// Bulk reports whether a fan-out (Each: a batch route's) is running in
// this process, whichever service runs it: bulk work, for which the
// program may let the heap grow, as the collector's heap is the
// process's too (serve's floor, cmd/system1/gcfloor.go).
func Bulk() bool { return fanOuts.Load() > 0 }

// Each calls do for each of n rows, requests of k questions over model,
// as row-wise work (Throughput), asking at most as many at once as the
// nodes serving the model run with every slot busy (Capacity), and at
// least one, so that a batch keeps the slots full without queueing more
// calls at a node than it holds; it returns when every call has. It is
// the one fan-out of both batch routes (AnswerBatch, and decide's over
// its chain). rowTimeout, when not 0, bounds the whole by as many as the
// rows take waves.
func (s *Service) Each(ctx context.Context, model string, k, n int, rowTimeout time.Duration, do func(ctx context.Context, i int)) {
	fanOuts.Add(1)
	defer fanOuts.Add(-1)
	ctx = Throughput(ctx)
	parallel := min(n, max(1, s.Capacity(ctx, model, k)))
	if rowTimeout > 0 && n > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rowTimeout*time.Duration((n+parallel-1)/parallel))
		defer cancel()
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range next {
				do(ctx, i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// answerState answers state i of b.
func (s *Service) answerState(ctx context.Context, b Batch, i int) (*Answer, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.refused(b.Model, err)
	}
	req := b.Request
	req.State, req.Start = b.States[i], time.Now()
	if i < len(b.IDs) {
		req.RequestID = b.IDs[i]
	}
	if b.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.Timeout)
		defer cancel()
	}
	a, err := s.Answer(ctx, req)
	if a != nil {
		a.Took = time.Since(req.Start)
	}
	return a, err
}

// Throughput marks the requests answered under ctx as row-wise work, one
// state among many asked at once to keep the slots busy (a batch, a job's
// rows): an engine with a prompt cache per slot gives each state a slot
// of its own and asks its questions there one after another, which
// evaluates no more tokens than asking them together and leaves the
// other slots to other states (engine.WithThroughput). The answers are
// those of the same requests asked alone.
func Throughput(ctx context.Context) context.Context { return engine.WithThroughput(ctx) }
