package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/decision"
)

// Run runs a job: it counts the input's rows (refusing duplicate ids),
// resumes the output where an earlier run left it, and asks the rest
// through the decider, keeping its capacity in flight and writing each
// row's answer or error in input order. It returns the job's summary with
// a nil error when every row of the input has its line; when the run
// stops first (ctx is cancelled, the decider is unavailable, a write
// fails) the summary counts what was written and the error says why: the
// next run resumes there. No partial line is ever left behind but by a
// crash, and the next run removes that one.
func Run(ctx context.Context, opt Options) (Summary, error) {
	start := time.Now()
	opt = opt.withDefaults()
	switch {
	case opt.In == "":
		return Summary{}, errors.New("no input")
	case opt.Out == "":
		return Summary{}, errors.New("no output")
	case opt.Decider == nil:
		return Summary{}, errors.New("no decider")
	case len(opt.Job.Questions) == 0:
		return Summary{}, errors.New("no questions")
	}
	fmtName, err := format(opt.In, opt.Format)
	if err != nil {
		return Summary{}, err
	}
	cols, err := outcomeColumns(opt.Job, opt.Outcomes)
	if err != nil {
		return Summary{}, err
	}
	// The input is read twice, to count and check the rows and then to
	// ask them: a pipe would be empty the second time.
	if fi, err := os.Stat(opt.In); err == nil && fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0 {
		return Summary{}, fmt.Errorf("%s is a pipe: the rows are read twice (to count and check them, then to ask them), so the input must be a file, not a pipe; write the rows to a file first", opt.In)
	}
	// The answers never go into the input: resuming would take its rows
	// for answers, or its last line for a torn one.
	if fi, err := os.Stat(opt.In); err == nil {
		if fo, err := os.Stat(opt.Out); err == nil && os.SameFile(fi, fo) {
			return Summary{}, fmt.Errorf("the output %s is the input %s: write the answers to a file of their own", opt.Out, opt.In)
		}
	}
	total, err := scanInput(ctx, opt.In, fmtName, opt.Job.Questions, cols)
	if err != nil {
		return Summary{}, err
	}
	rows, err := openRows(opt.In, fmtName, opt.Job.Questions, false, cols)
	if err != nil {
		return Summary{}, err
	}
	defer rows.Close()
	out, stream, err := openOutput(ctx, opt.Out)
	if err != nil {
		return Summary{}, err
	}
	defer out.Close()
	t := newTally(opt.Job)
	done := 0
	if stream {
		// Once the run is stopped, a write blocked on a reader that does
		// not read (a pipe) is given a second, then given up, so that
		// SIGTERM and Ctrl-C end the run.
		defer context.AfterFunc(ctx, func() { _ = out.SetWriteDeadline(time.Now().Add(time.Second)) })()
	} else {
		var size int64
		if size, done, err = resume(ctx, out, rows, t); err != nil {
			return Summary{}, fmt.Errorf("resuming %s: %w", opt.Out, err)
		}
		// A line torn by a crash is cut off; nothing else is changed.
		if err := out.Truncate(size); err != nil {
			return Summary{}, err
		}
		if _, err := out.Seek(size, io.SeekStart); err != nil {
			return Summary{}, err
		}
	}

	rn := newRunner(ctx, opt, total, done)
	defer rn.cancel(nil)
	prog := newProgress(opt.Progress, opt.ProgressEvery, total, done, start)
	prog.errors.Store(int64(t.errors))
	rn.readCapacity()
	go rn.pollCapacity()
	go func() {
		rn.dispatch(rows)
		rn.units.Wait() // the dispatcher starts every unit
		close(rn.results)
	}()
	stopProgress := prog.start()
	next, werr := rn.write(out, stream, done, t, prog)
	stopProgress()

	s := t.summary()
	s.Total, s.Resumed, s.Wall = total, done, time.Since(start)
	s.FeedbackOn, s.Feedback = opt.Feedback != nil, rn.fed
	if rn.fedErr != nil {
		s.FeedbackError = rn.fedErr.Error()
	}
	if secs := s.Wall.Seconds(); secs > 0 {
		s.RowsPerSecond = float64(next-done) / secs
	}
	switch {
	case werr != nil && (ctx.Err() == nil || !errors.Is(werr, os.ErrDeadlineExceeded)):
		return s, fmt.Errorf("writing %s: %w", opt.Out, werr)
	case next == total:
		return s, nil
	case ctx.Err() != nil:
		return s, fmt.Errorf("interrupted after %d of %d rows; run again to resume: %w", next, total, context.Cause(ctx))
	}
	// The default cannot happen: every row is written or a cause is set.
	cause := cmp.Or(context.Cause(rn.ctx), errors.New("the run ended early"))
	return s, fmt.Errorf("stopped after %d of %d rows; run again to resume: %w", next, total, cause)
}

// runner is one run's machinery: a dispatcher reading rows and keeping
// the decider's capacity in flight, units asking them, and a writer
// putting their lines in order.
type runner struct {
	opt     Options
	batcher BatchDecider // nil when the decider takes no batches
	total   int
	first   int // the index of the first row to ask: those before were resumed
	ctx     context.Context
	cancel  context.CancelCauseFunc // ends the run; the first cause stays

	// window holds a token for each row read and not yet written, so that
	// at most opt.Window rows are ever held.
	window chan struct{}
	// results carries each row's outcome to the writer.
	results chan *outcome
	// free gets a value as each unit ends, freeing its slot.
	free  chan struct{}
	units sync.WaitGroup
	// limit is how many units may be in flight; limitChanged is pinged
	// when it changes.
	limit        atomic.Int64
	limitChanged chan struct{}
	noBatch      sync.Once

	// fed counts the outcomes recorded as feedback, and fedErr is why
	// recording stopped; both the writer's.
	fed    int
	fedErr error
}

// outcomeColumns checks the Outcomes option against the job and returns
// it by column: the question's index.
func outcomeColumns(job decision.Request, outcomes map[string]string) (map[string]int, error) {
	cols := map[string]int{}
	for qid, col := range outcomes {
		q := questionIndex(job.Questions, qid)
		switch {
		case q < 0:
			return nil, fmt.Errorf("outcome %s=%s: the job has no question %q", qid, col, qid)
		case col == "" || col == "id" || col == "state" || col == "expected" || strings.HasPrefix(col, ExpectedPrefix):
			return nil, fmt.Errorf("outcome %s=%s: the column %q cannot hold an outcome", qid, col, col)
		}
		if other, dup := cols[col]; dup {
			return nil, fmt.Errorf("the column %q holds the outcomes of both %s and %s", col, job.Questions[other].ID, qid)
		}
		cols[col] = q
	}
	return cols, nil
}

// feed records the outcomes of answered rows as feedback; a failure
// stops the feeding for the rest of the run (the summary says why), never
// the run.
func (rn *runner) feed(outs []Outcome) {
	if rn.opt.Feedback == nil || rn.fedErr != nil || len(outs) == 0 {
		return
	}
	// Recorded even as the run stops: these rows' lines are written.
	n, err := rn.opt.Feedback.RecordOutcomes(context.WithoutCancel(rn.ctx), outs)
	rn.fed, rn.fedErr = rn.fed+n, err
}

// item is a row the dispatcher has read, with its place in the input.
type item struct {
	idx int
	row inputRow
}

// outcome is what became of one row.
type outcome struct {
	item
	// line is the row's output line; nil when the row was abandoned (the
	// run is stopping), which ends the output before it.
	line    []byte
	res     Result
	errType string // set for an error row
}

func newRunner(ctx context.Context, opt Options, total, done int) *runner {
	rn := &runner{opt: opt, total: total, first: done,
		window:       make(chan struct{}, opt.Window),
		results:      make(chan *outcome, opt.Window),
		free:         make(chan struct{}, opt.MaxConcurrency),
		limitChanged: make(chan struct{}, 1),
	}
	rn.batcher, _ = opt.Decider.(BatchDecider)
	rn.ctx, rn.cancel = context.WithCancelCause(ctx)
	return rn
}

// readCapacity sets the limit from the decider's capacity, or from
// Options.Concurrency when it cannot tell.
func (rn *runner) readCapacity() {
	c := rn.opt.Decider.Capacity(rn.ctx, rn.opt.Job)
	orDefault(&c, rn.opt.Concurrency)
	c = min(c, rn.opt.MaxConcurrency)
	if int64(c) != rn.limit.Swap(int64(c)) {
		select {
		case rn.limitChanged <- struct{}{}:
		default:
		}
	}
}

func (rn *runner) pollCapacity() {
	tick := time.NewTicker(rn.opt.CapacityEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			rn.readCapacity()
		case <-rn.ctx.Done():
			return
		}
	}
}

// batchSize is how many rows the next unit carries: one, unless the
// decider takes batches, then enough to spread the rows left over the
// units in flight, at most what the decider takes.
func (rn *runner) batchSize(left int) int {
	if rn.batcher == nil {
		return 1
	}
	most := min(rn.batcher.MaxBatch(), rn.opt.Window/2)
	if most <= 1 {
		return 1
	}
	limit := max(1, int(rn.limit.Load()))
	return min(most, max(1, (left+limit-1)/limit))
}

// dispatch reads the rows after those resumed and launches units over
// them, no more at once than the limit. An unreadable row goes straight to
// the writer as an error row.
func (rn *runner) dispatch(rows rowReader) {
	inFlight := 0
	var pending []item
	// A unit goes to an idle worker when there is one, else to a new
	// one; workers wait for the next unit rather than end, because the
	// answer path grows a new goroutine's stack several times over, a
	// cost per row that a kept goroutine pays once. Closing work ends
	// the idle ones.
	work := make(chan []item)
	defer close(work)
	// launch starts a unit over pending once a slot is free; false when
	// the run is stopping. inFlight counts the units whose end has not
	// been taken from free: never fewer than are running, so that a unit
	// launched under the limit is within it.
	launch := func() bool {
		for inFlight >= int(rn.limit.Load()) {
			select {
			case <-rn.free:
				inFlight--
			case <-rn.limitChanged:
			case <-rn.ctx.Done():
				return false
			}
		}
		inFlight++
		unit := pending
		pending = nil
		rn.units.Add(1)
		select {
		case work <- unit:
		default:
			go rn.worker(unit, work)
		}
		return true
	}
	idx := rn.first
	for {
		// A token for the row about to be read; when none is free and rows
		// are pending, they go first, since the rows that would free a
		// token may be among them.
		select {
		case rn.window <- struct{}{}:
		default:
			if len(pending) > 0 && !launch() {
				return
			}
			select {
			case rn.window <- struct{}{}:
			case <-rn.ctx.Done():
				return
			}
		}
		if rn.ctx.Err() != nil {
			return
		}
		row, err := rows.Next()
		if errors.Is(err, io.EOF) {
			<-rn.window
			break
		}
		if err != nil {
			rn.cancel(fmt.Errorf("reading %s: %w", rn.opt.In, err))
			return
		}
		it := item{idx: idx, row: row}
		idx++
		if row.Err != nil {
			rn.results <- rn.settle(it, Result{}, row.Err, 0)
			continue
		}
		pending = append(pending, it)
		if len(pending) >= rn.batchSize(rn.total-idx+len(pending)) && !launch() {
			return
		}
	}
	if len(pending) > 0 {
		launch()
	}
}

// worker asks unit, then each unit work brings, until work is closed.
func (rn *runner) worker(unit []item, work <-chan []item) {
	for ok := true; ok; unit, ok = <-work {
		rn.unit(unit)
	}
}

// unit asks its rows: together when there are several and the decider
// takes them, else (or when the batch fails as a whole, but for
// unavailability) one by one.
func (rn *runner) unit(items []item) {
	defer rn.units.Done()
	defer func() { rn.free <- struct{}{} }()
	if len(items) > 1 {
		states := make([]json.RawMessage, len(items))
		for i, it := range items {
			states[i] = it.row.State
		}
		t0 := time.Now()
		res, errs, err := rn.batcher.DecideBatch(rn.ctx, rn.opt.Job, states)
		lat := time.Since(t0)
		switch {
		case err == nil && len(res) == len(items) && len(errs) == len(items):
			for i, it := range items {
				rn.results <- rn.settle(it, res[i], errs[i], lat)
			}
			return
		case err != nil && (rn.ctx.Err() != nil || errors.Is(err, ErrUnavailable)):
			for _, it := range items {
				rn.results <- rn.settle(it, Result{}, err, lat)
			}
			return
		case errors.Is(err, ErrNoBatch):
			// The capacity was counted in batches: count it in rows now,
			// rather than at the next reading.
			rn.noBatch.Do(func() { go rn.readCapacity() })
		}
	}
	for _, it := range items {
		req := rn.opt.Job
		req.State = it.row.State
		t0 := time.Now()
		res, err := rn.opt.Decider.Decide(rn.ctx, req)
		rn.results <- rn.settle(it, res, err, time.Since(t0))
	}
}

// settle turns a row's result or error into its outcome. An error with
// the run stopping, or one wrapping ErrUnavailable (which stops it), is
// no row's: the row is abandoned, unwritten.
func (rn *runner) settle(it item, res Result, err error, lat time.Duration) *outcome {
	o := &outcome{item: it}
	if err == nil {
		if err = checkResult(rn.opt.Job, res); err != nil {
			err = fmt.Errorf("%w (a bug of the decider)", err)
		}
	}
	switch {
	case it.row.Err != nil:
		e := classify(it.row, it.row.Err)
		o.line, o.errType = appendErrorLine(nil, it.row.ID, e), e.Type
	case errors.Is(err, ErrUnavailable):
		rn.cancel(fmt.Errorf("row at line %d: %w", it.row.Line, err))
	case err != nil && rn.ctx.Err() != nil:
		// abandoned: the run is stopping
	case err != nil:
		e := classify(it.row, err)
		o.line, o.errType = appendErrorLine(nil, it.row.ID, e), e.Type
	default:
		o.line, o.res = appendAnswerLine(make([]byte, 0, 256), it.row.ID, rn.opt.Job, res, lat), res
	}
	return o
}

// write puts the outcomes' lines into out in input order, from row next
// on, until the results end or a row is abandoned, and returns the index
// after the last row written. Lines are written whole, in batches of at
// most 64 KiB or every 100ms, and synced every opt.SyncEvery and at the
// end (unless out is a stream). A write that fails stops the run. A row
// is tallied once its line is written, so that the summary counts only
// what the output holds.
func (rn *runner) write(out *os.File, stream bool, next int, t *tally, prog *progress) (int, error) {
	sync := out.Sync
	if stream {
		sync = func() error { return nil } // a pipe or a device has no disk to flush to
	}
	w := rn.opt.Window
	ring := make([]*outcome, w)
	buf := make([]byte, 0, 64<<10)
	var fed []Outcome    // the outcomes of the rows in buf
	var inBuf []*outcome // the rows whose lines are in buf
	written := next      // the index after the last row written
	stopped := false
	var werr error
	flush := func() {
		if werr != nil {
			buf, fed, inBuf = buf[:0], fed[:0], inBuf[:0] // the run is stopping: nothing more is written
			return
		}
		// The outcomes first: a crash between the two asks those rows
		// again, and never leaves an answer line without its feedback.
		rn.feed(fed)
		fed = fed[:0]
		if len(buf) == 0 {
			return
		}
		n, err := out.Write(buf)
		// Only the lines written whole count: a short write's torn line
		// is cut off by the next run, which asks its row again.
		for _, o := range inBuf {
			if n < len(o.line) {
				break
			}
			n -= len(o.line)
			if o.errType != "" {
				t.failed(o.errType)
				prog.errors.Add(1)
			} else {
				t.answered(o.row, o.res.Answers, o.res.Usage)
			}
			written++
			prog.written.Add(1)
		}
		if werr = err; werr != nil {
			rn.cancel(werr)
		}
		buf, inBuf = buf[:0], inBuf[:0]
	}
	flushTick := time.NewTicker(100 * time.Millisecond)
	defer flushTick.Stop()
	syncTick := time.NewTicker(rn.opt.SyncEvery)
	defer syncTick.Stop()
	for {
		select {
		case o, ok := <-rn.results:
			if !ok {
				flush()
				if werr == nil {
					werr = sync()
				}
				return written, werr
			}
			if stopped {
				<-rn.window
				continue
			}
			ring[o.idx%w] = o
			for {
				o := ring[next%w]
				if o == nil {
					break
				}
				ring[next%w] = nil
				<-rn.window
				if o.line == nil {
					// Abandoned: nothing after it is written either.
					stopped = true
					for _, rest := range ring {
						if rest != nil {
							<-rn.window
						}
					}
					clear(ring)
					break
				}
				buf = append(buf, o.line...)
				inBuf = append(inBuf, o)
				if o.errType == "" && rn.opt.Feedback != nil && o.res.RequestID != "" {
					for i, e := range o.row.Expected {
						if q := rn.opt.Job.Questions[i]; e >= 0 && e < len(q.Options) {
							fed = append(fed, Outcome{RequestID: o.res.RequestID, Question: q.ID, Option: q.Options[e].Key})
						}
					}
				}
				next++
			}
			if len(buf) >= 64<<10 {
				flush()
			}
		case <-flushTick.C:
			flush()
		case <-syncTick.C:
			flush()
			if werr == nil {
				if err := sync(); err != nil {
					werr = err
					rn.cancel(err)
				}
			}
		}
	}
}
