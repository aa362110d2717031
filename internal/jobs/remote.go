package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"system1/internal/decision"
	"system1/internal/httpcall"
	"system1/internal/systemone"
)

// RemoteDecider decides through a System One endpoint over HTTP: a system1
// server, hosted Jev, laya-serve. Each row is a POST /v1/systemone; where
// the endpoint answers POST /v1/systemone/batch (laya-serve's extension:
// up to 64 states over one questions map), rows go in batches, and the
// first 404 or 405 from that route turns batches off for good. A 429, a
// 5xx or a failed connection is retried after the Retry-After the
// endpoint asks for (else a growing pause), a bounded number of times;
// a 4xx (a 422 above all) is the row's error and is not retried. Its zero
// value, with URL set, is ready to use, and it is safe for concurrent use.
type RemoteDecider struct {
	// URL is the endpoint's root (http://host:8080), to which
	// /v1/systemone is added; one that already ends in /v1/systemone is
	// used as is.
	URL string
	// Key is the bearer key; empty sends none.
	Key string
	// HTTP is the client; nil is one whose calls time out after two
	// minutes, so that an endpoint that hangs costs retries, not the run.
	HTTP *http.Client
	// Retries is how many times a call is tried again after a 429, a 502,
	// 503 or 504, or a failed connection (default 4; negative: none). A
	// 500 is tried again too, but one still failing is the row's error:
	// a row that breaks the endpoint would otherwise stop every run at it.
	Retries int
	// MaxWait bounds one pause before trying again, the endpoint's
	// Retry-After included (default 30s).
	MaxWait time.Duration
	// BatchMax is how many states one batch call carries (default
	// systemone.MaxBatchStates); 1 turns batches off.
	BatchMax int

	noBatch  atomic.Bool  // the batch route answered 404 or 405 after the last batch it took
	inFlight atomic.Int64 // rows this decider has in flight
}

var _ BatchDecider = (*RemoteDecider)(nil)

// defaultHTTP is the client of a RemoteDecider without one.
var defaultHTTP = &http.Client{Timeout: 2 * time.Minute}

func (d *RemoteDecider) httpClient() *http.Client { return cmp.Or(d.HTTP, defaultHTTP) }

func (d *RemoteDecider) client() *systemone.Client {
	return &systemone.Client{BaseURL: d.URL, Key: d.Key, HTTP: d.httpClient()}
}

// Decide asks one row.
func (d *RemoteDecider) Decide(ctx context.Context, req decision.Request) (Result, error) {
	var reply *systemone.Reply
	err := d.retry(ctx, false, func() (err error) {
		d.inFlight.Add(1)
		defer d.inFlight.Add(-1)
		reply, err = d.client().Ask(ctx, req)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return result(reply), nil
}

func result(r *systemone.Reply) Result {
	return Result{Model: r.Model, Answers: r.Answers, Usage: r.Usage}
}

// MaxBatch is BatchMax until the endpoint is found to have no batch
// route, then 1.
func (d *RemoteDecider) MaxBatch() int {
	if d.noBatch.Load() {
		return 1
	}
	if d.BatchMax <= 0 {
		return systemone.MaxBatchStates
	}
	return min(d.BatchMax, systemone.MaxBatchStates)
}

// DecideBatch asks job over states in one POST /v1/systemone/batch.
func (d *RemoteDecider) DecideBatch(ctx context.Context, job decision.Request, states []json.RawMessage) ([]Result, []error, error) {
	if d.noBatch.Load() {
		return nil, nil, ErrNoBatch
	}
	var replies []*systemone.Reply
	var errs []error
	err := d.retry(ctx, true, func() (err error) {
		d.inFlight.Add(int64(len(states)))
		defer d.inFlight.Add(-int64(len(states)))
		replies, errs, err = d.client().AskBatch(ctx, job, states)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	d.noBatch.Store(false)
	out := make([]Result, len(replies))
	for i, r := range replies {
		if r != nil {
			out[i] = result(r)
		}
	}
	// A state the endpoint could not answer now (a system1 batch reports
	// each state's own status) is asked again alone, with the retries a
	// row gets: only a state's own refusal is its answer.
	for i, e := range errs {
		var se *systemone.StatusError
		if errors.As(e, &se) && retryable(se.Code) {
			req := job
			req.State = states[i]
			out[i], errs[i] = d.Decide(ctx, req)
		}
	}
	return out, errs, nil
}

// retryable reports whether a status is one a call is tried again after.
func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
}

// retry runs call until it succeeds, fails for good, or the retries are
// spent (the decider is then unavailable).
func (d *RemoteDecider) retry(ctx context.Context, batch bool, call func() error) error {
	retries := cmp.Or(d.Retries, 4)
	for attempt := 0; ; attempt++ {
		err := call()
		if err == nil || ctx.Err() != nil {
			return err
		}
		again, wait, final := d.judge(err, attempt, batch)
		if !again {
			return final
		}
		if attempt >= retries {
			var se *systemone.StatusError
			if errors.As(err, &se) && se.Code == http.StatusInternalServerError {
				return err // the row's, see Retries
			}
			return fmt.Errorf("%w: %v (tried %d times)", ErrUnavailable, err, attempt+1)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// judge says whether err is worth trying again, after how long, and if
// not, the error to return.
func (d *RemoteDecider) judge(err error, attempt int, batch bool) (again bool, wait time.Duration, final error) {
	maxWait := d.MaxWait
	orDefault(&maxWait, 30*time.Second)
	wait = Backoff(attempt, 0, maxWait)
	var se *systemone.StatusError
	switch {
	case errors.Is(err, systemone.ErrMalformed):
		return false, 0, err
	case !errors.As(err, &se):
		return true, wait, nil // the connection failed
	case batch && (se.Code == http.StatusNotFound || se.Code == http.StatusMethodNotAllowed):
		d.noBatch.Store(true)
		return false, 0, fmt.Errorf("%w: %v", ErrNoBatch, err)
	case se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden || se.Code == http.StatusNotFound:
		// No row can be asked: the key is refused, or the route is not
		// there.
		return false, 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
	case retryable(se.Code) && se.RetryAfter > maxWait:
		// Waiting less than asked would only be refused again (a key's
		// budget spent until its period resets).
		return false, 0, fmt.Errorf("%w: %v; it asks to be tried again in %s, past the %s a run waits", ErrUnavailable, err, se.RetryAfter.Round(time.Second), maxWait)
	case retryable(se.Code):
		return true, Backoff(attempt, se.RetryAfter, maxWait), nil
	}
	return false, 0, err // a 4xx: the row's own
}

// Capacity reads the endpoint's GET /health: where it reports its nodes'
// slots, the rows of job that fill the slots of the healthy nodes serving
// its model, less those other callers hold (their calls in flight and
// queued); while batches are on, in batches of MaxBatch rows, and one
// batch more, so that the next is there when one ends; where it does not
// (hosted Jev, laya-serve, a system1 hiding its nodes from callers
// without a key), 0.
func (d *RemoteDecider) Capacity(ctx context.Context, job decision.Request) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := strings.TrimSuffix(strings.TrimRight(d.URL, "/"), "/v1/systemone") + "/health"
	data, err := httpcall.Send(ctx, d.httpClient(), http.MethodGet, u, nil, nil, d.Key, 1<<20)
	if err != nil {
		return 0
	}
	var h struct {
		Nodes []nodeLoad `json:"nodes"`
	}
	if json.Unmarshal(data, &h) != nil {
		return 0
	}
	b := d.MaxBatch()
	rows := capacity(h.Nodes, job.Model, len(job.Questions), int(d.inFlight.Load()), b > 1)
	if b <= 1 || rows == 0 {
		return rows
	}
	return (rows+b-1)/b + 1
}

// nodeLoad is what /health says of one node: the fleet's State, of which
// only these fields are read.
type nodeLoad struct {
	Dialect  string   `json:"dialect"`
	Healthy  bool     `json:"healthy"`
	Models   []string `json:"models"`
	InFlight int      `json:"in_flight"`
	Queued   int      `json:"queued"`
	// Slots is how many calls the node takes at once (its max_inflight),
	// when /health reports it.
	Slots int `json:"slots"`
}

// capacity is how many rows of k questions keep the slots of nodes full,
// with mine rows of this caller already in flight, as system1's fleet
// counts them (fleet.Router.Capacity and fleet.RowSlots, which a test
// holds this to). A node runs one row's questions at once on up to half
// its slots (the fleet's share), so a node of s slots is full with
// ceil(s / min(k, s/2)) rows; but rows asked in batches are row-wise work,
// on which a llama.cpp node gives each row a slot of its own, so that it
// is full with s rows. Other callers' calls (in flight or queued, less
// this caller's) take their rows' worth off the total. 0 when some node
// does not report its slots.
func capacity(nodes []nodeLoad, model string, k, mine int, batches bool) int {
	serving := slices.ContainsFunc(nodes, func(n nodeLoad) bool { return n.Healthy && slices.Contains(n.Models, model) })
	var rows, slots, busy int
	for _, n := range nodes {
		if !n.Healthy || (serving && !slices.Contains(n.Models, model)) {
			continue
		}
		if n.Slots <= 0 {
			return 0
		}
		per := max(1, min(k, n.Slots/2))
		if batches && n.Dialect == "llamacpp" {
			per = 1
		}
		rows += (n.Slots + per - 1) / per
		slots += n.Slots
		busy += n.InFlight + n.Queued
	}
	if rows == 0 {
		return 0
	}
	// Calls per row, over the fleet.
	per := float64(slots) / float64(rows)
	others := max(0, float64(busy)-float64(mine)*per)
	return max(1, rows-int(others/per))
}
