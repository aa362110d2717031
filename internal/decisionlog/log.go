package decisionlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/decision"
)

// Defaults of Options.
const (
	DefaultQueue      = 10000
	DefaultRetention  = 30 * 24 * time.Hour
	DefaultMaxRows    = 1_000_000
	DefaultPruneEvery = 10 * time.Minute
	// DefaultBatch and DefaultLinger make a transaction of what arrives
	// within a tenth of a second, up to 512 records. A transaction costs
	// about 80 µs of CPU besides its records (its WAL pages, the commit),
	// so the writer's CPU per record falls with the batch: about 50 µs at
	// 2 records, 17 at 16, 10 at 512 (BenchmarkInsert). Past 512 it falls
	// no further than the larger arrays cost: at 2,048, a server at
	// saturation kept three arrays of 2,048 records (0.7 MB each) for the
	// collector to scan, and a cache hit took a tenth more CPU
	// (docs/decision-log.md).
	// A process killed meanwhile loses what is queued, as before (a Flush,
	// a Lookup or Close writes it at once).
	DefaultBatch  = 512
	DefaultLinger = 100 * time.Millisecond
)

// Options configure a Log. Exactly one of Path and URL is set.
type Options struct {
	// Path is the SQLite file; its folder is created when missing.
	Path string
	// URL is a PostgreSQL connection URL (postgres://...), used instead of
	// the file so that several replicas share one log.
	URL string
	// KeepStates stores each record's state beside its hash.
	KeepStates bool
	// Retention is how long records and outcomes are kept (0:
	// DefaultRetention); older ones are deleted every PruneEvery.
	Retention time.Duration
	// MaxRows bounds the decisions kept (0: DefaultMaxRows); past it the
	// oldest are deleted every PruneEvery. A record takes about 0.5 KiB
	// without its state, so the default bounds the log near 0.5 GiB.
	MaxRows int64
	// Queue bounds the records waiting to be written (0: DefaultQueue).
	Queue int
	// Batch bounds the records of one transaction (0: DefaultBatch).
	Batch int
	// PruneEvery is how often retention and MaxRows are applied (0:
	// DefaultPruneEvery); also once at Open.
	PruneEvery time.Duration
	// Linger is how long the writer waits after a record for others to
	// join its transaction, unless a batch is queued first (0:
	// DefaultLinger; negative: not at all). A process killed meanwhile
	// loses them, as it loses anything queued.
	Linger time.Duration
	// Logger gets write failures; nil is slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Stats count what happened to the records given to Record.
type Stats struct {
	// Written were committed; Dropped were left out because the queue was
	// full or the log closed; Failed were lost to a write that failed.
	Written, Dropped, Failed uint64
	// Queued wait to be written now.
	Queued int
}

// Log is the decision log. A nil *Log is a log that is off: Record does
// nothing and counts nothing.
type Log struct {
	opt   Options
	store *store

	// queued are the records waiting for the writer, at most
	// opt.Queue; spare is an empty array for the queue's next (take);
	// own is the writer's. A slice rather than a channel of opt.Queue records:
	// a channel's buffer is allocated whole and stays in the live heap,
	// 3.6 MB at the default, which the collector scans each cycle
	// (issue 34); this holds what is queued.
	qmu           sync.Mutex
	queued, spare []Record
	own           []Record
	// held is how many records the writer took and has not written: at
	// most opt.Batch more than the queue's bound wait in all, as when it
	// took them a batch at a time.
	held int
	// wake tells the writer that a record is queued; full, lingering,
	// that what it holds and what is queued make a batch.
	wake    chan struct{}
	full    chan struct{}
	flushes chan chan error
	stop    chan struct{}
	// abort is cancelled when Close's deadline passes: the writer's
	// transaction in flight ends and the rest of the queue is dropped.
	abort       context.Context
	cancelAbort context.CancelFunc
	// closing is cancelled when Close begins: a prune in progress is
	// given up (the next Open prunes), so that the queue is written.
	closing       context.Context
	cancelClosing context.CancelFunc
	done          chan struct{}
	once          sync.Once
	closed        atomic.Bool

	written, dropped, failed atomic.Uint64
	// gone is set once the SQLite file was found removed or replaced
	// while open; checked is when the writer last looked (checkFile).
	gone    atomic.Bool
	checked time.Time
	// spend counts the keys' spend as records are given, when budgets
	// are (Log.Spend).
	spend atomic.Pointer[Spend]
	// follow are the functions Follow gave; answers is the writer's
	// buffer of what it gives them.
	follow  atomic.Pointer[[]*func([]Answer)]
	answers []Answer
}

// Open opens the log (creating its schema when missing) and starts its
// writer. Close it when done.
func Open(ctx context.Context, opt Options) (*Log, error) {
	if (opt.Path == "") == (opt.URL == "") {
		return nil, errors.New("decision log: give a path or a url, not both or neither")
	}
	opt.Queue = cmp.Or(max(opt.Queue, 0), DefaultQueue)
	opt.Batch = cmp.Or(max(opt.Batch, 0), DefaultBatch)
	opt.Retention = cmp.Or(max(opt.Retention, 0), DefaultRetention)
	opt.MaxRows = cmp.Or(max(opt.MaxRows, 0), DefaultMaxRows)
	opt.PruneEvery = cmp.Or(max(opt.PruneEvery, 0), DefaultPruneEvery)
	opt.Linger = cmp.Or(opt.Linger, DefaultLinger)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.Logger = cmp.Or(opt.Logger, slog.Default())
	var s *store
	var err error
	if opt.URL != "" {
		s, err = openPostgres(ctx, opt.URL)
	} else {
		s, err = openSQLite(ctx, opt.Path)
	}
	if err != nil {
		return nil, err
	}
	l := &Log{
		opt: opt, store: s,
		wake:    make(chan struct{}, 1),
		full:    make(chan struct{}, 1),
		flushes: make(chan chan error),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	l.abort, l.cancelAbort = context.WithCancel(context.Background())
	l.closing, l.cancelClosing = context.WithCancel(context.Background())
	l.prune(ctx)
	go l.run()
	return l, nil
}

// Record queues r to be written and returns at once. It never blocks and
// never fails: when the queue is full, or the log is closed, r is dropped
// and counted in Stats.Dropped. The log keeps r's slices; do not modify
// them afterwards.
func (l *Log) Record(r Record) {
	if l == nil {
		return
	}
	if l.closed.Load() {
		l.dropped.Add(1)
		return
	}
	if r.Time.IsZero() {
		r.Time = l.opt.Now()
	}
	// Counted as given, kept or dropped: the answer was paid for.
	if sp := l.spend.Load(); sp != nil && r.Key != "" && r.Cost != nil {
		r.spent = sp.add(r.Key, r.Time, *r.Cost)
	}
	l.qmu.Lock()
	// Closed again under the lock Close sets it under: a record that
	// passed the check above while Close began would otherwise be queued
	// after the writer's last drain, neither written nor counted.
	if l.closed.Load() || len(l.queued) >= l.opt.Queue || len(l.queued)+l.held >= l.opt.Queue+l.opt.Batch {
		l.qmu.Unlock()
		l.dropped.Add(1)
		return
	}
	l.queued = append(l.queued, r)
	n, whole := len(l.queued), l.wholeLocked()
	l.qmu.Unlock()
	if n == 1 {
		signal(l.wake)
	}
	if whole {
		signal(l.full)
	}
}

// wholeLocked reports whether what the writer holds and what is queued
// make a batch. The caller holds l.qmu.
func (l *Log) wholeLocked() bool { return len(l.queued)+l.held >= l.opt.Batch }

// signal sends on c, of capacity 1, unless a signal waits there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// queuedLen is how many records wait.
func (l *Log) queuedLen() int {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return len(l.queued)
}

// Dropped is the number of records dropped so far, for a metric.
func (l *Log) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// Stats returns the counts so far.
func (l *Log) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	return Stats{Written: l.written.Load(), Dropped: l.dropped.Load(), Failed: l.failed.Load(), Queued: l.queuedLen()}
}

// Flush waits until every record queued before the call is written (or
// lost to a failed write, whose error it returns), or ctx ends.
func (l *Log) Flush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case l.flushes <- reply:
	case <-l.done:
		return errors.New("decision log: closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking records, writes those queued until ctx ends, counts
// any left as dropped, and closes the store. It returns ctx's error when
// the queue was not drained in time.
func (l *Log) Close(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		l.qmu.Lock()
		l.closed.Store(true)
		l.qmu.Unlock()
		close(l.stop)
		l.cancelClosing()
		select {
		case <-l.done:
		case <-ctx.Done():
			err = fmt.Errorf("decision log: %d records not written: %w", l.queuedLen(), ctx.Err())
			// The writer's batch in flight is cancelled; what is left
			// is dropped.
			l.cancelAbort()
			<-l.done
		}
		l.cancelAbort()
		if n := l.queuedLen(); n > 0 {
			l.dropped.Add(uint64(n))
		}
		if cerr := l.store.close(); err == nil && cerr != nil {
			err = fmt.Errorf("decision log: %w", cerr)
		}
	})
	return err
}

// run is the writer: it batches queued records into transactions,
// answers flushes, and prunes.
func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(l.opt.PruneEvery)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-l.wake:
			// The first record of a burst wakes the writer; those that
			// follow within the linger are queued without waking it, and
			// share its transaction.
			recs := l.take(l.own)
			if len(recs) == 0 {
				continue // written by a flush since
			}
			var flush chan error
			if l.opt.Linger > 0 && len(recs) < l.opt.Batch {
				flush = l.linger(timer)
				recs = l.take(recs)
			}
			// What is queued now, a flush's records included, is
			// written now, a backlog in whole batches back to back.
			err := l.writeAll(l.abort, recs)
			if flush != nil {
				flush <- err
			}
		case reply := <-l.flushes:
			reply <- l.writeAll(l.abort, l.take(l.own))
		case <-tick.C:
			l.prune(l.closing)
		case <-l.stop:
			l.drainOnStop()
			return
		}
	}
}

// take appends what is queued to recs, the writer's own array, and
// empties the queue. The queue's array is swapped for the spare, copied
// from outside the lock, and kept as the next spare: three arrays go
// round (the queue's, the spare, the writer's), none grown again once
// they hold what a linger queues.
func (l *Log) take(recs []Record) []Record {
	l.qmu.Lock()
	q := l.queued
	l.queued, l.spare = l.spare[:0], nil
	l.held += len(q)
	l.qmu.Unlock()
	recs = append(recs, q...)
	clear(q)
	l.qmu.Lock()
	l.spare = q[:0]
	l.qmu.Unlock()
	return recs
}

// writeAll writes recs in batches of at most opt.Batch records and
// returns the first write error. Once ctx ends (Close's deadline) what
// is left is dropped.
func (l *Log) writeAll(ctx context.Context, recs []Record) error {
	var first error
	for rest := recs; len(rest) > 0; {
		if ctx.Err() != nil {
			l.dropped.Add(uint64(len(rest)))
			break
		}
		batch := rest[:min(len(rest), l.opt.Batch)]
		rest = rest[len(batch):]
		if err := l.write(ctx, batch); err != nil && first == nil {
			first = err
		}
	}
	clear(recs) // the records' slices are not kept past their write
	l.qmu.Lock()
	l.held -= len(recs)
	l.qmu.Unlock()
	l.own = recs[:0]
	return first
}

// linger waits, with t, until the linger has passed, what the writer
// holds and what is queued make a batch, a Flush asks (whose reply it
// returns, to be answered once what is queued is written) or Close.
func (l *Log) linger(t *time.Timer) (flush chan error) {
	select {
	case <-l.full: // perhaps stale: counted afresh below
	default:
	}
	// A signal drained above may have been sent for records still
	// queued: they are counted here, and those queued from now on
	// signal again.
	l.qmu.Lock()
	whole := l.wholeLocked()
	l.qmu.Unlock()
	if whole {
		return nil
	}
	t.Reset(l.opt.Linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.full:
	case flush = <-l.flushes:
	case <-l.stop:
	}
	return flush
}

// drainOnStop writes what is queued at Close, until the queue is empty
// or Close's deadline passes.
func (l *Log) drainOnStop() {
	for l.queuedLen() > 0 && l.abort.Err() == nil {
		_ = l.writeAll(l.abort, l.take(l.own))
	}
}

// writeTimeout bounds one batch's transaction, so a database that stops
// answering cannot hold the writer (and a Close) forever.
const writeTimeout = 30 * time.Second

func (l *Log) write(ctx context.Context, batch []Record) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	bad, err := l.store.insert(ctx, batch, l.opt.KeepStates)
	if bad > 0 {
		l.failed.Add(uint64(bad))
		l.opt.Logger.Error("decision log: records left out: a distribution is not finite, or a text holds a NUL or ids longer than PostgreSQL can store", "records", bad)
	}
	if err != nil {
		l.failed.Add(uint64(len(batch) - bad))
		l.opt.Logger.Error("decision log: write failed", "records", len(batch)-bad, "err", err)
		return fmt.Errorf("decision log: %d records not written: %w", len(batch)-bad, err)
	}
	l.written.Add(uint64(len(batch) - bad))
	l.checkFile()
	if sp := l.spend.Load(); sp != nil {
		sp.wrote(batch, l.store.wrote)
	}
	if fs := l.follow.Load(); fs != nil && len(*fs) > 0 && l.store.lastID > 0 {
		l.tell(*fs, batch, len(batch)-bad)
	}
	return nil
}

// fileCheckEvery is how often, at most, the writer looks whether the
// SQLite file it writes is still the one its path names.
const fileCheckEvery = 5 * time.Second

// checkFile says, once, that the SQLite file was removed or replaced
// since it was opened: SQLite writes on into the unlinked file, which no
// reader will find and the disk frees at exit. The writer looks after a
// write, at most every fileCheckEvery.
func (l *Log) checkFile() {
	if l.store.file == nil || l.gone.Load() || time.Since(l.checked) < fileCheckEvery {
		return
	}
	l.checked = time.Now()
	if now, err := os.Stat(l.opt.Path); err == nil && os.SameFile(now, l.store.file) {
		return
	}
	l.gone.Store(true)
	l.opt.Logger.Error("decision log: its file was removed or replaced while open: what is written since is lost when the process exits; restart to open a new one", "path", l.opt.Path)
}

// Gone reports whether the log's SQLite file was found removed or
// replaced while open (checkFile): what it records is then lost at exit.
func (l *Log) Gone() bool { return l != nil && l.gone.Load() }

// Follow has fn given, each time this process's writer commits a batch,
// the Answers of its records with their ids, in id order, so that a
// reader of the log's tail (outcomes' drift) need not read back what
// this process wrote, until stop is called. Only on SQLite, where the
// rows of a transaction take consecutive ids; on PostgreSQL fn is never
// called (a replica's ids may come between: a follower reads the log by
// id, as it does for what other processes write). fn runs on the
// writer: it must be quick, must not use the log, and must not keep the
// slice (the Answers' Options and Dist it may).
func (l *Log) Follow(fn func([]Answer)) (stop func()) {
	f := &fn
	l.follows(func(fs []*func([]Answer)) []*func([]Answer) { return append(fs, f) })
	return func() {
		l.follows(func(fs []*func([]Answer)) []*func([]Answer) {
			return slices.DeleteFunc(fs, func(g *func([]Answer)) bool { return g == f })
		})
	}
}

// follows replaces the followers with what change makes of a copy.
func (l *Log) follows(change func([]*func([]Answer)) []*func([]Answer)) {
	for {
		old := l.follow.Load()
		var fs []*func([]Answer)
		if old != nil {
			fs = slices.Clone(*old)
		}
		fs = change(fs)
		if l.follow.CompareAndSwap(old, &fs) {
			return
		}
	}
}

// noOptions is the options of a record without any, as read back (the
// column holds []).
var noOptions = []string{}

// tell gives fs the Answers of the written records of batch, n of them,
// the last of id store.lastID.
func (l *Log) tell(fs []*func([]Answer), batch []Record, n int) {
	as := l.answers[:0]
	id := l.store.lastID - int64(n) + 1
	for i := range batch {
		if !l.store.wrote(i) {
			continue
		}
		r := &batch[i]
		a := Answer{ID: id, At: r.Time.UnixNano(), Face: r.Face, Model: r.Model, Kind: r.Kind, Options: r.Options, Dist: decision.Uncalibrated(r.EngineDist, r.Steps)}
		if a.Options == nil {
			a.Options = noOptions
		}
		as = append(as, a)
		id++
	}
	for _, f := range fs {
		(*f)(as)
	}
	clear(as) // the records' slices are not kept past the batch
	l.answers = as[:0]
}

func (l *Log) prune(ctx context.Context) {
	if _, err := l.Prune(ctx); err != nil && l.closing.Err() == nil {
		l.opt.Logger.Error("decision log: pruning failed", "err", err)
	}
}

// Prune applies retention and the row bound now, returning how many
// decisions were deleted.
func (l *Log) Prune(ctx context.Context) (int64, error) {
	return l.store.prune(ctx, l.opt.Now().Add(-l.opt.Retention), l.opt.MaxRows)
}

// The errors of Outcome; wrapped with details, they match with errors.Is.
var (
	// ErrUnknownRequest: no record has the request id (a 404).
	ErrUnknownRequest = errors.New("unknown request_id")
	// ErrUnknownQuestion: the request has no question of that id.
	ErrUnknownQuestion = errors.New("unknown question")
	// ErrQuestionRequired: the question was left out and the request has
	// more than one.
	ErrQuestionRequired = errors.New("question is required")
	// ErrBadOutcome: the outcome is not one of the question's options
	// (a 422 naming outcome).
	ErrBadOutcome = errors.New("outcome is not one of the question's options")
)

// OutcomeError is an outcome that is not one of the question's options
// (nor NoneFit, for a choice).
type OutcomeError struct {
	Outcome string
	Options []string
}

// Error says what was given and what is allowed.
func (e *OutcomeError) Error() string {
	return fmt.Sprintf("outcome %q is not one of the question's options %q", e.Outcome, e.Options)
}

// Is makes an OutcomeError match ErrBadOutcome.
func (e *OutcomeError) Is(target error) bool { return target == ErrBadOutcome }

// Lookup returns the records of a request, in question order as written.
// It first waits for what is queued, so a record given to Record before
// the call is found.
func (l *Log) Lookup(ctx context.Context, requestID string) ([]Entry, error) {
	if err := l.Flush(ctx); err != nil {
		return nil, err
	}
	return l.stored(ctx, requestID)
}

// stored is Lookup without waiting for what is queued.
func (l *Log) stored(ctx context.Context, requestID string) ([]Entry, error) {
	if l.store.postgres && strings.IndexByte(requestID, 0) >= 0 {
		return nil, nil // nothing is stored under it there (holdsNUL), and PostgreSQL refuses the query
	}
	es, err := l.store.entries(ctx, "WHERE d.request_id = ? ORDER BY d.id", requestID)
	if err != nil {
		return nil, fmt.Errorf("decision log: lookup: %w", err)
	}
	return es, nil
}

// ReplicaLag bounds how long feedback waits for the records of an answer
// another writer may still hold: a replica sharing the log answers, its
// caller sends feedback to another replica at once, and the first one's
// writer is still lingering (Options.Linger) before its transaction. The
// wait is taken only for an id this log's kind makes (NewRequestID) that
// was made within the linger and this margin, so an unknown old id is a
// 404 at once. It is also how far ahead of this clock another replica's
// may run: an id made later than that was made by no replica (a caller's
// own or forged, such as req_ffff...), and is a 404 at once too.
const ReplicaLag = time.Second

// lookupRecent is Lookup that, when nothing is recorded under a request
// id made moments ago, or nothing of questionID when it is not "" (a
// request's questions are recorded one by one, and a writer may commit
// them in two transactions), reads again until the records arrive or the
// id is older than the linger and ReplicaLag.
func (l *Log) lookupRecent(ctx context.Context, requestID, questionID string) ([]Entry, error) {
	found := func(es []Entry) bool {
		return questionID == "" && len(es) > 0 || slices.ContainsFunc(es, func(e Entry) bool { return e.QuestionID == questionID })
	}
	es, err := l.Lookup(ctx, requestID)
	if err != nil || found(es) {
		return es, err
	}
	made, ok := requestIDTime(requestID)
	if !ok || made.After(l.opt.Now().Add(ReplicaLag)) {
		return es, nil
	}
	until := made.Add(max(l.opt.Linger, 0) + ReplicaLag)
	for l.opt.Now().Before(until) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
		if es, err = l.stored(ctx, requestID); err != nil || found(es) {
			return es, err
		}
	}
	return es, nil
}

// Outcome records what turned out right for a question: outcome is one of
// its option keys (a criteria key, "true" or "false", a level key "0".."k-1",
// a decide option), or NoneFit for a choice none of whose options was
// right. The latest outcome for a question wins; earlier ones
// are kept. questionID may be "" when the request has a single question,
// as a decide request does. It returns the entry the outcome is for, as
// it stands after it.
//
// It reads the stored records first and waits for the queue only when
// they do not name the question, so feedback on an answer written long
// ago does not wait behind the traffic queued since.
func (l *Log) Outcome(ctx context.Context, requestID, questionID, outcome string) (Entry, error) {
	e, err := l.Check(ctx, requestID, questionID, outcome)
	if err != nil {
		return Entry{}, err
	}
	es, err := l.Outcomes(ctx, []Checked{{Entry: e, Outcome: outcome}})
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// Checked is an outcome Check accepted, with the entry Check returned for
// it.
type Checked struct {
	Entry   Entry
	Outcome string
}

// Outcomes records a batch of outcomes that Check accepted, in order, in
// one transaction: when the store fails, none of them is recorded. It
// returns each outcome's entry as it stands after it, as Outcome does:
// an outcome counts those of the batch before it for the same question.
func (l *Log) Outcomes(ctx context.Context, batch []Checked) ([]Entry, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	at := l.opt.Now()
	if err := l.store.addOutcomes(ctx, batch, at); err != nil {
		if len(batch) == 1 {
			return nil, fmt.Errorf("decision log: outcome not recorded: %w", err)
		}
		return nil, fmt.Errorf("decision log: none of the %d outcomes recorded: %w", len(batch), err)
	}
	out := make([]Entry, len(batch))
	earlier := map[[2]string]int{}
	for i, c := range batch {
		e := c.Entry
		key := [2]string{e.RequestID, e.QuestionID}
		e.Outcome = &Outcome{Value: c.Outcome, Time: at.UTC()}
		e.Outcomes += earlier[key] + 1
		earlier[key]++
		out[i] = e
	}
	return out, nil
}

// Check is Outcome without the write: the entry the outcome would be
// for, or the error Outcome would return. A batch of outcomes is checked
// whole before any is written.
func (l *Log) Check(ctx context.Context, requestID, questionID, outcome string) (Entry, error) {
	// Whether the request has one question is only known once none of its
	// records is queued; a question named is looked for first in what is
	// stored.
	if questionID != "" {
		es, err := l.stored(ctx, requestID)
		if err != nil {
			return Entry{}, err
		}
		e, err := l.resolve(es, requestID, questionID, outcome)
		if !errors.Is(err, ErrUnknownRequest) && !errors.Is(err, ErrUnknownQuestion) {
			return e, err
		}
		// Its records may still be queued, here or by another replica.
	}
	es, err := l.lookupRecent(ctx, requestID, questionID)
	if err != nil {
		return Entry{}, err
	}
	return l.resolve(es, requestID, questionID, outcome)
}

func (l *Log) resolve(es []Entry, requestID, questionID, outcome string) (Entry, error) {
	// A shadow candidate's answer was never given to the caller: it takes
	// no outcome, so its id names no answer feedback can be for.
	es = slices.DeleteFunc(es, func(e Entry) bool { return e.Face == FaceShadow })
	if len(es) == 0 {
		return Entry{}, fmt.Errorf("%w %q", ErrUnknownRequest, requestID)
	}
	// The latest record of each question: a request id a caller reused
	// names its last decision.
	latest := map[string]Entry{}
	var ids []string
	for _, e := range es {
		if _, ok := latest[e.QuestionID]; !ok {
			ids = append(ids, e.QuestionID)
		}
		latest[e.QuestionID] = e
	}
	if questionID == "" {
		if len(ids) != 1 {
			return Entry{}, fmt.Errorf("%w: request %q has %d questions (%q)", ErrQuestionRequired, requestID, len(ids), ids)
		}
		questionID = ids[0]
	}
	e, ok := latest[questionID]
	if !ok {
		return Entry{}, fmt.Errorf("%w %q in request %q (it has %q)", ErrUnknownQuestion, questionID, requestID, ids)
	}
	if !slices.Contains(e.Options, outcome) && !(outcome == NoneFit && e.Kind == decision.Choice) {
		return Entry{}, &OutcomeError{Outcome: outcome, Options: e.Options}
	}
	if l.store.postgres && strings.IndexByte(outcome, 0) >= 0 {
		// An option key may hold a NUL (its record keeps it escaped in
		// JSON), but an outcome is a text column there, which cannot.
		return Entry{}, nulOutcomeError(outcome)
	}
	return e, nil
}

// nulOutcomeError is an option key with a NUL given as an outcome to a
// log on PostgreSQL: an outcome that does not fit, as ErrBadOutcome is.
type nulOutcomeError string

func (e nulOutcomeError) Error() string {
	return fmt.Sprintf("outcome %q holds a NUL, which the decision log's PostgreSQL cannot store", string(e))
}

func (nulOutcomeError) Is(target error) bool { return target == ErrBadOutcome }

// Window returns the records written from since (inclusive) to until
// (exclusive), oldest first, each with its latest outcome; model, when
// not empty, keeps only that model's.
func (l *Log) Window(ctx context.Context, since, until time.Time, model string) ([]Entry, error) {
	return l.window(ctx, since, until, model, false, false)
}

// WindowLabelled is the records of Window that have an outcome: all that
// a refit or a report reads. It finds them from the outcomes, so its cost
// follows the outcomes, not every answer the window holds.
func (l *Log) WindowLabelled(ctx context.Context, since, until time.Time, model string) ([]Entry, error) {
	return l.window(ctx, since, until, model, true, false)
}

// CascadeLabelled is the records of WindowLabelled that a cascade asked
// (Record.Cascade not empty): every stage's answer to each question.
func (l *Log) CascadeLabelled(ctx context.Context, since, until time.Time) ([]Entry, error) {
	return l.window(ctx, since, until, "", true, true)
}

func (l *Log) window(ctx context.Context, since, until time.Time, model string, labelled, cascades bool) ([]Entry, error) {
	if err := l.Flush(ctx); err != nil {
		return nil, err
	}
	where := "WHERE d.at_ns >= ? AND d.at_ns < ?"
	if labelled {
		where = "WHERE d.id IN (SELECT l.id FROM outcomes o JOIN decisions l ON l.request_id = o.request_id AND l.question_id = o.question_id" +
			" WHERE l.at_ns >= ? AND l.at_ns < ?)"
	}
	args := []any{since.UnixNano(), until.UnixNano()}
	if model != "" {
		where += " AND d.model = ?"
		args = append(args, model)
	}
	if cascades {
		where += " AND d.cascade_model <> ''"
	}
	es, err := l.store.entries(ctx, where+" ORDER BY d.id", args...)
	if err != nil {
		return nil, fmt.Errorf("decision log: window: %w", err)
	}
	return es, nil
}

// Shadows returns the shadow answers (FaceShadow) written from since
// (inclusive) to until (exclusive), oldest first, each with its latest
// outcome, and every other record of the requests they shadow
// (ShadowRequestID), by request in the order written: what a shadow
// report pairs, read without the rest of the window, whose served
// answers can be many times more.
func (l *Log) Shadows(ctx context.Context, since, until time.Time) (shadows, served []Entry, err error) {
	if err := l.Flush(ctx); err != nil {
		return nil, nil, err
	}
	shadows, err = l.store.entries(ctx, "WHERE d.face = ? AND d.at_ns >= ? AND d.at_ns < ? ORDER BY d.id", FaceShadow, since.UnixNano(), until.UnixNano())
	if err != nil {
		return nil, nil, fmt.Errorf("decision log: shadows: %w", err)
	}
	var ids []any
	seen := map[string]bool{}
	for _, e := range shadows {
		if id, ok := strings.CutPrefix(e.RequestID, ShadowPrefix); ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if served, err = l.store.requestEntries(ctx, ids, "d.face <> ?", FaceShadow); err != nil {
		return nil, nil, fmt.Errorf("decision log: shadows: %w", err)
	}
	return shadows, served, nil
}

// requestsPerQuery is how many request ids one query names: a few
// hundred, well under both backends' bounds on parameters.
const requestsPerQuery = 500

// requestEntries reads the records of the requests ids that also meet
// and (a condition on d, with args), requestsPerQuery ids a query, each
// query's records in the order written; a request's records all come in
// its id's query.
func (s *store) requestEntries(ctx context.Context, ids []any, and string, args ...any) ([]Entry, error) {
	var out []Entry
	for chunk := range slices.Chunk(ids, requestsPerQuery) {
		es, err := s.entries(ctx, "WHERE d.request_id IN "+placeholders(len(chunk))+" AND "+and+" ORDER BY d.id", append(chunk, args...)...)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// placeholders is a parenthesised list of n SQL parameters, "(?,?,?)".
func placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")"
}

// Labelled is one outcome with the record it is for: Entry.Outcome is
// this outcome (Entry.Outcomes is not counted).
type Labelled struct {
	Entry
	// OutcomeID is the outcome's id, increasing in the order outcomes
	// were recorded, by this process or any other sharing the log.
	OutcomeID int64
}

// OutcomesAfter returns the outcomes recorded after the one of id after
// (0: from the first), at most limit of them (at least 1), in the order
// recorded, each with the record it is for: one item for each record of
// its request and question, as Window attaches the latest outcome to
// each. next is the id to read on from: the last one returned, or after
// when there is nothing new. Reading on from next sees exactly what was
// recorded since, across processes that share the log, so a reader that
// keeps its own statistics up to date reads only what changed. It does
// not wait for queued records: an outcome is recorded only for a record
// already written.
func (l *Log) OutcomesAfter(ctx context.Context, after int64, limit int) (out []Labelled, next int64, err error) {
	upTo, err := l.store.outcomeBound(ctx, after, max(limit, 1))
	if err != nil {
		return nil, after, fmt.Errorf("decision log: outcomes: %w", err)
	}
	if upTo == after {
		return nil, after, nil
	}
	out, err = l.store.labelled(ctx, after, upTo)
	if err != nil {
		return nil, after, fmt.Errorf("decision log: outcomes: %w", err)
	}
	return out, upTo, nil
}

// Oldest is the id of the oldest record kept, 0 when there is none:
// records under it were pruned (retention, max_rows), and a reader's
// statistics of them should go too.
func (l *Log) Oldest(ctx context.Context) (int64, error) {
	id, err := l.store.id(ctx, "SELECT MIN(id) FROM decisions")
	if err != nil {
		return 0, fmt.Errorf("decision log: oldest: %w", err)
	}
	return id, nil
}

// Labelled returns Groups of the window's records that have an outcome:
// what a refit or a report per model, kind and bucket reads. Records a
// swap left uncertain (InUncertain) are left out: either build may have
// answered them.
func (l *Log) Labelled(ctx context.Context, since, until time.Time, model string) ([]Group, error) {
	es, err := l.WindowLabelled(ctx, since, until, model)
	if err != nil {
		return nil, err
	}
	ws, err := l.Uncertain(ctx)
	if err != nil {
		return nil, err
	}
	es = slices.DeleteFunc(es, func(e Entry) bool {
		return InUncertain(ws, e.Node, e.Model, e.Fingerprint, e.Time.UnixNano())
	})
	return Groups(es), nil
}
