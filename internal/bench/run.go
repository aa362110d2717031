// Package bench measures a System One endpoint, or a provider of the
// gateway's chain, on labelled cases: it asks every case, keeps each
// answer's distribution, and reports per set and overall how often the
// answers are right and how well their probabilities say so (the metrics
// of package calibration), with latency and throughput, as a JSON report,
// a Markdown table and a reliability diagram. It also fits calibration
// temperatures from a saved run, so that fitting never asks the model
// again.
package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/systemone"
)

// Answer is a request answered: the model that answered and, aligned with
// the request's questions, the distribution over each question's options
// ([P(true), P(false)] for a noul).
type Answer struct {
	Model string
	Dists []decision.Distribution
	// Builds are, aligned with Dists, the fingerprint of the build that
	// answered each question ("" unknown); nil when the asker cannot tell.
	Builds []string
}

// Asker answers one request, every question or none.
type Asker interface {
	Ask(ctx context.Context, req decision.Request) (Answer, error)
}

// The askers a run may ask.
var (
	_ Asker = Endpoint{}
	_ Asker = Fleet{}
)

// Endpoint asks a System One endpoint (our own /v1/systemone, hosted Jev,
// laya-serve, ...) through systemone.Client, which applies every real
// client's checks to the reply: a reply that would break a client is an
// error, never a prediction.
type Endpoint struct{ Client *systemone.Client }

// Ask implements Asker.
func (e Endpoint) Ask(ctx context.Context, req decision.Request) (Answer, error) {
	r, err := e.Client.Ask(ctx, req)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Model: r.Model, Dists: r.Dists}, nil
}

// Answerer is system1's answer path (answer.Service), what Fleet asks.
type Answerer interface {
	Answer(ctx context.Context, req answer.Request) (*answer.Answer, error)
}

// Fleet asks system1's own answer path, as every face does, checks
// included: a request some question of which is unanswered, or answered
// with what is not a distribution over its options, is an error. It
// keeps each question's distribution before calibration
// (answer.Question.Uncalibrated), the engine's after debias and prior,
// unrounded: what a calibration fit is made on, from a bench run as from
// the decision log, whatever fits the path applies. A question the gate
// refuses keeps its distribution, as the bench measures the model; one a
// node declined with no reading is an error. The path should record
// nothing and cache nothing: answerPath without a decision log or a
// cache.
type Fleet struct{ Path Answerer }

// Ask implements Asker.
func (f Fleet) Ask(ctx context.Context, req decision.Request) (Answer, error) {
	a, err := f.Path.Answer(ctx, answer.Request{Request: req})
	if err != nil {
		return Answer{}, err
	}
	out := Answer{Model: a.Model}
	for i, q := range a.Questions {
		d := q.Uncalibrated()
		if d == nil {
			return Answer{}, fmt.Errorf("question %s: %s", req.Questions[i].ID, q.Refusal)
		}
		out.Dists = append(out.Dists, d)
		out.Builds = append(out.Builds, q.Fingerprint)
	}
	return out, nil
}

// Record is one case asked: where it comes from, how long it took, and
// per question the distribution the answer carried, or the error that
// left it unanswered. A bench report keeps every record, so that a
// calibration fit never asks the model again.
type Record struct {
	ID  string `json:"id"`
	Set string `json:"set"`
	// Provider is the gateway provider asked, when the bench asked one.
	Provider string `json:"provider,omitempty"`
	// Model is the model that answered, as the reply names it; empty when
	// the request failed.
	Model string `json:"model,omitempty"`
	// StartMS is when the request was sent, in milliseconds from the start
	// of the run, and LatencyMS how long its answer took.
	StartMS   float64 `json:"start_ms"`
	LatencyMS float64 `json:"latency_ms"`
	// Error is why the request failed; a failed request has no
	// distributions and is counted in the report's errors.
	Error     string     `json:"error,omitempty"`
	Questions []Question `json:"questions"`
}

// Question is one question of a case and its answer's distribution.
type Question struct {
	ID      string        `json:"id"`
	Kind    decision.Kind `json:"kind"`
	Options int           `json:"options"`
	// Expected is the index of the right option, as in cases.Case.
	Expected int `json:"expected"`
	// Dist is the distribution the answer carried, over the options in
	// order ([P(true), P(false)] for a noul); nil when the request failed.
	Dist decision.Distribution `json:"dist,omitempty"`
	// Build is the fingerprint of the build that answered, when the asker
	// knows it (system1's own fleet does, an endpoint does not).
	Build string `json:"build,omitempty"`
}

// prediction is the question answered, for the metrics.
func (q Question) prediction() calibration.Prediction {
	return calibration.Prediction{Kind: q.Kind, Dist: q.Dist, Expected: q.Expected, Options: q.Options}
}

// Failed reports whether the request failed.
func (r Record) Failed() bool { return r.Error != "" }

// Run asks cases of an Asker.
type Run struct {
	Asker Asker
	// Model is the model id sent with every request.
	Model string
	// Provider is recorded in every record: the provider asked, if any.
	Provider string
	// Concurrency is how many requests are in flight at once; below 1 is 1.
	Concurrency int
	// Timeout bounds one request; 0 leaves it to the Asker.
	Timeout time.Duration
	// Progress, when set, is called after each case, by one goroutine at
	// a time.
	Progress func(Progress)
}

// Progress is how far a run has got.
type Progress struct {
	Done, Total, Errors int
	Elapsed             time.Duration
}

// Do asks every case and returns their records, in the cases' order, and
// the run's wall time. A request that fails, or is not sent because ctx
// ended, is a record with its error: nothing is dropped.
func (r Run) Do(ctx context.Context, cs []cases.Case) ([]Record, time.Duration) {
	// No more workers than cases: the rest would wait for none.
	n := max(min(r.Concurrency, len(cs)), 1)
	out := make([]Record, len(cs))
	start := time.Now()
	jobs := make(chan int)
	var mu sync.Mutex
	done, errs := 0, 0
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for i := range jobs {
				out[i] = r.ask(ctx, cs[i], start)
				mu.Lock()
				done++
				if out[i].Failed() {
					errs++
				}
				if r.Progress != nil {
					r.Progress(Progress{Done: done, Total: len(cs), Errors: errs, Elapsed: time.Since(start)})
				}
				mu.Unlock()
			}
		})
	}
	for i := range cs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out, time.Since(start)
}

// ask asks one case.
func (r Run) ask(ctx context.Context, c cases.Case, runStart time.Time) Record {
	rec := Record{ID: c.ID, Set: c.Set, Provider: r.Provider}
	for i, q := range c.Request.Questions {
		rec.Questions = append(rec.Questions, Question{ID: q.ID, Kind: q.Kind, Options: len(q.Options), Expected: c.Expected[i]})
	}
	req := c.Request
	req.Model = r.Model
	t0 := time.Now()
	rec.StartMS = ms(t0.Sub(runStart))
	if err := ctx.Err(); err != nil {
		rec.Error = "not sent: " + err.Error()
		return rec
	}
	actx := ctx
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	a, err := r.Asker.Ask(actx, req)
	rec.LatencyMS = ms(time.Since(t0))
	switch {
	case err != nil:
		rec.Error = err.Error()
	case len(a.Dists) != len(rec.Questions):
		rec.Error = fmt.Sprintf("%d distributions for %d questions", len(a.Dists), len(rec.Questions))
	default:
		rec.Model = a.Model
		for i := range rec.Questions {
			rec.Questions[i].Dist = a.Dists[i]
			if i < len(a.Builds) {
				rec.Questions[i].Build = a.Builds[i]
			}
		}
	}
	return rec
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
