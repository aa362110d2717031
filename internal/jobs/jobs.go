// Package jobs runs a file of rows through a decider: each row's state is
// asked the job's questions, the answers are written in input order with
// the row's id, a row that cannot be answered becomes an error row, and a
// run that stops (a crash, Ctrl-C, the decider going away) resumes where
// it left off. The decider is a small interface, met by the local core
// over a configuration and by RemoteDecider over a system1 URL.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"time"

	"system1/internal/decision"
	"system1/internal/systemone"
)

// Decider answers a job's rows.
type Decider interface {
	// Decide answers req: the job's model and questions over one row's
	// state. An error wrapping ErrUnavailable says that no row can be
	// answered now (the endpoint is down, refuses the key, or stayed
	// overloaded through its retries): the run stops without writing the
	// row, and the next run resumes there. Any other error is the row's
	// own and is written as its error row.
	Decide(ctx context.Context, req decision.Request) (Result, error)
	// Capacity returns how many calls over rows of job (its model and
	// questions; no state) the decider can have in flight with its slots
	// full and no more, or 0 when it cannot tell. A call is one row, or
	// one batch of rows from a BatchDecider. The runner reads it when it
	// starts, every Options.CapacityEvery, and when a BatchDecider turns
	// out to take no batches.
	Capacity(ctx context.Context, job decision.Request) int
}

// BatchDecider is a Decider that can also answer several states over the
// job's questions in one call.
type BatchDecider interface {
	Decider
	// MaxBatch returns how many states one DecideBatch call may carry
	// now; 1 or less when the decider offers no batches (or found that its
	// endpoint does not).
	MaxBatch() int
	// DecideBatch answers job over each of states. results and errs are
	// aligned with states, errs[i] being state i's own error as Decide
	// would return it. An error of the whole call wrapping ErrUnavailable
	// stops the run as it does from Decide; any other (ErrNoBatch among
	// them) has the runner ask the rows one by one, so that each gets its
	// own answer or error.
	DecideBatch(ctx context.Context, job decision.Request, states []json.RawMessage) (results []Result, errs []error, err error)
}

// Result is one row's answers.
type Result struct {
	// Model is the model that answered, as the decider reports it.
	Model string
	// RequestID is the id the answer was recorded under, where the
	// decider records it (the local answer path's decision log); the
	// row's outcomes are fed back under it. Empty when not recorded.
	RequestID string
	// Answers are aligned with the job's questions.
	Answers []decision.Answer
	Usage   systemone.Usage
}

// Outcome is a row's known outcome of one question, fed back on the
// answer recorded under RequestID.
type Outcome struct {
	RequestID string
	Question  string
	// Option is the key of the option that turned out right (a noul's
	// true or false).
	Option string
}

// OutcomeRecorder records rows' outcomes as feedback on their answers,
// so that a labelled input calibrates the model that answered it: the
// decision log's feedback (outcomes.Feedback), as POST /v1/feedback
// records it.
type OutcomeRecorder interface {
	// RecordOutcomes returns how many of outs it recorded, and why not
	// the rest.
	RecordOutcomes(ctx context.Context, outs []Outcome) (int, error)
}

// MaxConcurrency is the most calls a run keeps in flight, whatever the
// decider reports or Options.Concurrency asks.
const MaxConcurrency = 256

// ErrUnavailable marks a decider's error that is no row's fault: the run
// stops, writes nothing for the row, and a rerun resumes at it.
var ErrUnavailable = errors.New("the decider is unavailable")

// ErrNoBatch is BatchDecider.DecideBatch's error when the decider turns
// out to offer no batches.
var ErrNoBatch = errors.New("batches are not offered")

// Options configure a run. In, Out, Job and Decider are required; zero
// values elsewhere mean the defaults.
type Options struct {
	// In is the rows' file: JSONL, or CSV when its name ends in .csv. It
	// is read twice (once to count the rows and refuse duplicate ids), so
	// it must be a file, not a pipe.
	In string
	// Format is "jsonl" or "csv"; empty chooses by In's name.
	Format string
	// Out is the answers' file, JSONL in input order. An existing one is
	// resumed: its rows are checked against In's and not asked again.
	Out string
	// Job is the model and questions every row is asked (see
	// ParseQuestions); its State is unused.
	Job     decision.Request
	Decider Decider
	// Outcomes names, by question id, the input's column (CSV) or row
	// key (JSONL) that holds the question's outcome, as an
	// expected.<question id> column does: kept out of the state,
	// measured in the summary and, with Feedback, fed back.
	Outcomes map[string]string
	// Feedback, when not nil, records the outcomes the rows give
	// (Outcomes, expected) on the answers the decider recorded
	// (Result.RequestID), as the lines are written.
	Feedback OutcomeRecorder
	// Concurrency is how many calls (a row, or a batch) are kept in
	// flight when the decider cannot tell its capacity (default 4).
	Concurrency int
	// MaxConcurrency bounds the capacity a decider reports, and
	// Concurrency (default: the package's MaxConcurrency).
	MaxConcurrency int
	// CapacityEvery is how often the decider's capacity is read again
	// (default 5s).
	CapacityEvery time.Duration
	// Window bounds the rows read past the last one written: the rows in
	// flight plus those waiting for an earlier one to be written (default
	// 4096). It bounds the run's memory whatever the input's size.
	Window int
	// Progress, when not nil, shows the run's progress: a line redrawn in
	// place when it is a terminal, else a line every ProgressEvery.
	Progress io.Writer
	// ProgressEvery is how often progress is printed to a writer that is
	// not a terminal (default 10s).
	ProgressEvery time.Duration
	// SyncEvery is how often the answers are flushed to disk with fsync
	// (default 1s); they are also written, unsynced, every 100ms and at the
	// end. Losing unsynced lines (a power cut) only costs asking them
	// again.
	SyncEvery time.Duration
}

func (o Options) withDefaults() Options {
	orDefault(&o.Concurrency, 4)
	orDefault(&o.MaxConcurrency, MaxConcurrency)
	orDefault(&o.CapacityEvery, 5*time.Second)
	orDefault(&o.Window, 4096)
	orDefault(&o.ProgressEvery, 10*time.Second)
	orDefault(&o.SyncEvery, time.Second)
	return o
}

// orDefault sets *v to def where it is zero or negative.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Backoff is how long to wait before trying a call again after try
// attempt (0 for the first) found no answer now: the pause the endpoint
// or node asked for (retryAfter, 0 for none), else a growing one with
// jitter, so that many rows refused at once do not all come back at once;
// never more than maxWait. Both deciders wait by it.
func Backoff(attempt int, retryAfter, maxWait time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(maxWait, retryAfter)
	}
	return min(maxWait, time.Duration(float64(500*time.Millisecond)*float64(int(1)<<min(attempt, 10))*(0.75+rand.Float64()/2)))
}
