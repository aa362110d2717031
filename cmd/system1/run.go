package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/httpapi"
	"system1/internal/jobs"
	"system1/internal/outcomes"
	"system1/internal/systemone"
)

// cmdRun asks the same questions about every row of a file and writes one
// answer line per row, in the input's order (docs/run.md): locally,
// through the nodes of a configuration, or through a System One endpoint.
// The runner is internal/jobs; this only parses flags, builds the decider
// and prints.
func cmdRun(ctx context.Context, args []string, e env) error {
	fs := flags("run", e, "usage: system1 run --in ROWS --out ANSWERS --questions QUESTIONS.json [--model M] [--outcome QUESTION=COLUMN]... (--config FILE | --url URL [--key-env VAR])\n\n"+
		"Asks the questions about every row and writes one answer line per row, in order; a run\n"+
		"stopped or killed resumes where it left off when started again (docs/run.md).\n\n"+
		"exit status: 0 every row answered, 1 stopped before the end (run again to resume),\n"+
		"2 usage, 3 every row has its line but some are error rows.\n\nflags:\n")
	in := fs.String("in", "", "the rows: JSON Lines, or CSV when the name ends in .csv (required)")
	out := fs.String("out", "", "the answers, JSON Lines in input order; an existing file is resumed (required)")
	questions := fs.String("questions", "", "a JSON file of the questions: a Jev questions map, or a /v1/systemone body without its state (required)")
	model := fs.String("model", "", "the model to ask (default: the questions file's model)")
	cfgFlag := fs.String("config", "", "decide locally through this configuration's nodes, as system1 serve would")
	url := fs.String("url", "", "decide through this System One endpoint (another system1, hosted Jev, laya-serve)")
	keyEnv := fs.String("key-env", "", "with --url: the variable holding the endpoint's key")
	format := fs.String("format", "", "jsonl or csv (default: by the input's name)")
	concurrency := fs.Int("concurrency", 0, fmt.Sprintf("calls kept in flight when the decider cannot tell its capacity (default 4, at most %d)", jobs.MaxConcurrency))
	stateDir := fs.String("state-dir", "", "with --config: folder of the decision log "+stateDirDefault)
	outcomeCols := map[string]string{} // question id -> column
	fs.Func("outcome", "QUESTION=COLUMN: the column (JSONL: the row's key) holding the question's outcome, kept out of the state, measured in the summary and, with --config, recorded as feedback in the decision log (repeatable)", func(v string) error {
		q, col, ok := strings.Cut(v, "=")
		switch {
		case !ok || q == "" || col == "":
			return errors.New("QUESTION=COLUMN is required, such as dept=label")
		case outcomeCols[q] != "":
			return fmt.Errorf("the question %s is given twice", q)
		}
		outcomeCols[q] = col
		return nil
	})
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return e.usageError("run", fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case *in == "" || *out == "" || *questions == "":
		return e.usageError("run", "--in, --out and --questions are required")
	case (*cfgFlag == "") == (*url == ""):
		return e.usageError("run", "give exactly one of --config (decide locally) and --url (decide through an endpoint)")
	case *keyEnv != "" && *url == "":
		return e.usageError("run", "--key-env goes with --url")
	case *stateDir != "" && *url != "":
		return e.usageError("run", "--state-dir goes with --config: with --url the answers are recorded in the endpoint's decision log")
	case *concurrency < 0:
		return e.usageError("run", "--concurrency must be at least 1 (0: the default, 4)")
	case *concurrency > jobs.MaxConcurrency:
		return e.usageError("run", fmt.Sprintf("--concurrency must be at most %d, the most calls a run keeps in flight", jobs.MaxConcurrency))
	}
	if *format != "" {
		if err := jobs.CheckFormat(*format); err != nil {
			return e.usageError("run", "--"+err.Error())
		}
	}
	if *url != "" {
		if err := checkBaseURL("--url", *url); err != nil {
			return e.usageError("run", err)
		}
	}
	qdata, err := os.ReadFile(*questions)
	if err != nil {
		return fmt.Errorf("--questions: %w", err)
	}
	log := logger(e)
	keepGCFloor(e.getenv, func() uint64 { return bulkGCFloor })
	var decider jobs.Decider
	var local *localDecider
	if *url != "" {
		key, err := bearerKey(e, *keyEnv, false)
		if err != nil {
			return err
		}
		decider = &jobs.RemoteDecider{URL: *url, Key: key}
	} else {
		cfg, err := loadConfig(ctx, *cfgFlag, e.getenv, (*config.Config).Check)
		if err != nil {
			return err
		}
		var closeLocal func()
		if local, closeLocal, err = newLocalDecider(ctx, cfg, *stateDir, e); err != nil {
			return err
		}
		defer closeLocal()
		decider = local
	}
	job, err := jobs.ParseQuestions(qdata, *model, decision.DefaultLimits())
	if local != nil {
		// The questions are checked against the limits of the nodes
		// serving the model, as /v1/systemone checks a request's: read
		// first under the loosest any node may have, for the model.
		loose := decision.DefaultLimits()
		loose.MaxChoiceOptions, loose.MaxQuestions = config.MaxOptions, math.MaxInt32
		if job, err = jobs.ParseQuestions(qdata, *model, loose); err == nil {
			if lim, lerr := local.answer.Admit(ctx, job.Model); lerr == nil {
				job, err = jobs.ParseQuestions(qdata, *model, lim)
			}
		}
	}
	if errors.Is(err, jobs.ErrNoModel) {
		return e.usageError("run", fmt.Sprintf("--model is required: %s names no model (a questions map; a /v1/systemone body without its state gives its model)", *questions))
	}
	if err != nil {
		return err
	}
	log.Debug("run", "in", *in, "out", *out, "model", job.Model, "questions", len(job.Questions))
	opt := jobs.Options{In: *in, Format: *format, Out: *out, Job: job, Decider: decider,
		Concurrency: *concurrency, Progress: e.stderr, Outcomes: outcomeCols}
	if local != nil {
		opt.Feedback = local.feedback
	}
	s, err := jobs.Run(ctx, opt)
	if err != nil && s.Total == 0 && s.Rows == 0 {
		return err // it did not start: no summary of rows it never read
	}
	if werr := s.WriteText(summaryOut(*out, e)); werr != nil && err == nil {
		err = werr
	}
	if err == nil && s.Errors > 0 {
		fmt.Fprintf(e.stderr, "system1 run: %d of %d rows are error rows; each says why in %s (its \"error\", with the input line)\n", s.Errors, s.Rows, *out)
		return errRowsFailed
	}
	return err
}

// summaryOut is where run prints its summary: stdout, unless the answers
// go there too (--out /dev/stdout), which then holds only answer lines.
func summaryOut(out string, e env) io.Writer {
	if f, ok := e.stdout.(*os.File); ok {
		a, aerr := f.Stat()
		b, berr := os.Stat(out)
		if aerr == nil && berr == nil && os.SameFile(a, b) {
			return e.stderr
		}
	}
	return e.stdout
}

// errRowsFailed is run's outcome when every row has its line but some are
// error rows: exit 3, as docs/run.md says.
var errRowsFailed = errors.New("some rows failed")

// localDecider is system1 run's decider over a configuration: each row is
// a request of the answer path, as POST /v1/systemone asks it, with the
// calibration /v1/systemone applies and recorded in the decision log.
type localDecider struct {
	answer   *answer.Service
	feedback jobs.OutcomeRecorder // the rows' outcomes, into the decision log
	timeout  time.Duration
	rounding int
	// retries and maxWait bound how long a row waits for a fleet that
	// cannot answer now before the run stops (see Decide).
	retries int
	maxWait time.Duration
}

// newLocalDecider builds the decider over cfg, and what closes it (the
// decision log, written to the end).
func newLocalDecider(ctx context.Context, cfg *config.Config, stateDir string, e env) (*localDecider, func(), error) {
	log := logger(e)
	router, err := localRouter(cfg, e.getenv, log)
	if err != nil {
		return nil, nil, err
	}
	// With no calibration mode written, /v1/systemone applies the fits
	// serve's default loop keeps (Config.Learn), once there are any.
	fits, err := servingFits(learnt(cfg, stateDir, e.getenv), log)
	if err != nil {
		return nil, nil, err
	}
	dlog := openDecisionLog(ctx, cfg.DecisionLog, stateDir, e, log, nil)
	d := &localDecider{answer: answerPath(cfg, fits, dlog, answer.Options{Router: router, Local: true}), feedback: logFeedback{outcomes.NewFeedback(dlog)},
		timeout: cfg.Timeouts.Request.Or(httpapi.DefaultRequestTimeout), rounding: cfg.Decimals(), retries: 4, maxWait: 30 * time.Second}
	return d, func() { closeDecisionLog(dlog, log) }, nil
}

// Decide answers one row. A row the fleet refuses as the caller's (a
// state over a limit, a context too long) is the row's error, as a 422,
// and so is one with a question system1 will not stand behind (one the
// model ranked no label of on every node); an answer that fails the
// checks is the row's malformed reply. When the fleet cannot answer now
// (the nodes are down, busy or cooling down, or none serves the model)
// the row is tried again after the pause a node asked for, else a
// growing one, a bounded number of times: then no row can be answered,
// and the run stops there to be resumed.
func (d *localDecider) Decide(ctx context.Context, req decision.Request) (jobs.Result, error) {
	// The state is held to the limits POST /v1/systemone holds it to, so
	// that --config refuses what --url does, with the same 422.
	// An unknown model is held to the default limits here and answered
	// as unavailable below.
	lim, _ := d.answer.Admit(ctx, req.Model)
	if ps := decision.ValidateState(req.State, lim); len(ps) > 0 {
		return jobs.Result{}, &systemone.StatusError{Code: http.StatusUnprocessableEntity, Message: "state: " + ps[0].Msg}
	}
	for attempt := 0; ; attempt++ {
		id := decisionlog.NewRequestID()
		a, err := d.ask(ctx, req, id)
		if err == nil {
			res, err := d.result(req, a)
			res.RequestID = id
			return res, err
		}
		var f *answer.Failure
		switch {
		case ctx.Err() != nil:
			return jobs.Result{}, ctx.Err()
		case !errors.As(err, &f):
			return jobs.Result{}, err
		case f.Class == answer.CallerError:
			return jobs.Result{}, &systemone.StatusError{Code: http.StatusUnprocessableEntity, Message: f.Error()}
		case f.Class == answer.UnknownModel:
			return jobs.Result{}, fmt.Errorf("%w: %v", jobs.ErrUnavailable, f)
		case malformed(f):
			return jobs.Result{}, fmt.Errorf("%w: %v", systemone.ErrMalformed, f)
		case attempt >= d.retries:
			return jobs.Result{}, fmt.Errorf("%w: %v (tried %d times)", jobs.ErrUnavailable, f, attempt+1)
		}
		t := time.NewTimer(jobs.Backoff(attempt, f.RetryAfter, d.maxWait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return jobs.Result{}, ctx.Err()
		}
	}
}

// ask is one try of a row, bounded by the request timeout.
func (d *localDecider) ask(ctx context.Context, req decision.Request, id string) (*answer.Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.answer.Answer(answer.Throughput(ctx), answer.Request{Request: req, Face: decisionlog.FaceRun,
		RequestID: id, Start: time.Now()})
}

// malformed reports whether every question of f failed for a reading
// that was not usable: the row's own, not the fleet's.
func malformed(f *answer.Failure) bool {
	return len(f.Problems) > 0 && !slices.ContainsFunc(f.Problems, func(p answer.Problem) bool { return p.Class != answer.Malformed })
}

// result is an answer as a job's row gets it: the questions' answers as
// /v1/systemone reports them, or its 422 where system1 will not stand
// behind one of them.
func (d *localDecider) result(req decision.Request, a *answer.Answer) (jobs.Result, error) {
	if a.Refused() {
		return jobs.Result{}, &systemone.StatusError{Code: http.StatusUnprocessableEntity, Message: systemone.ValidationMessage(systemone.InBody, a.Refusals(req.Questions))}
	}
	res := jobs.Result{Model: a.Model, Usage: systemone.Usage(a.Usage)}
	for i, q := range req.Questions {
		ans, err := decision.NewAnswer(q, a.Questions[i].Dist, d.rounding)
		if err != nil { // the answer passed the core's checks: a bug
			return jobs.Result{}, err
		}
		res.Answers = append(res.Answers, ans)
	}
	return res, nil
}

// Capacity is how many rows the nodes serving the job's model run at once
// with every slot busy (answer.Service.Capacity).
func (d *localDecider) Capacity(ctx context.Context, job decision.Request) int {
	return d.answer.Capacity(ctx, job.Model, len(job.Questions))
}

// logFeedback records a run's outcomes through outcomes.Feedback, the
// path POST /v1/feedback, system1_feedback and system1 feedback take.
type logFeedback struct{ f *outcomes.Feedback }

// RecordOutcomes records outs in batches of the most one feedback call
// takes.
func (l logFeedback) RecordOutcomes(ctx context.Context, outs []jobs.Outcome) (int, error) {
	n := 0
	for batch := range slices.Chunk(outs, outcomes.MaxFeedbackOutcomes) {
		items := make([]outcomes.FeedbackItem, len(batch))
		for i, o := range batch {
			key, _ := json.Marshal(o.Option) // a Go string always marshals
			items[i] = outcomes.FeedbackItem{RequestID: o.RequestID, Question: o.Question, Outcome: key}
		}
		if res := l.f.Record(ctx, items); res.Error != nil {
			return n, errors.New(res.Error.Message)
		}
		n += len(batch)
	}
	return n, nil
}
