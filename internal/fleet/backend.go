package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"system1/internal/decision"
	"system1/internal/decisionsapi"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/engine/openai"
	"system1/internal/fingerprint"
	"system1/internal/systemone"
	"system1/internal/tracing"
)

// Backend is what stands behind a node: an engine dialect, or a System One
// upstream. Every node has exactly one; the router asks it the same way
// whichever it is, and classifies its failures by one rule.
type Backend interface {
	// Models lists the models the node serves: a cheap call that carries
	// no user data, used both to discover models and to probe health.
	Models(ctx context.Context) ([]string, error)
	// ask answers every question of req (whose model is the served one)
	// through c, each result aligned with req.Questions.
	ask(c *caller, req decision.Request) []answer
	// calls is how many engine calls of its own reading question q of
	// model once (one order of its options) costs: its rounds on an
	// engine, none where the request's one call carries it (requestCost).
	calls(model string, q decision.Question) int
	// reads reports whether the backend can read q at all: an engine
	// whose calls read a capped number of labels (max_labels) reads a
	// score's levels and a noul's sides only within one call.
	reads(q decision.Question) bool
	// spends says how the backend spends engine calls, for the refusal of
	// a request over budget: "reads 20 labels a call".
	spends() string
}

// The backends a node may have.
var (
	_ Backend = (*engineBackend)(nil)
	_ Backend = (*upstreamBackend)(nil)
	_ Backend = unusable{}
)

// EngineBackend is a backend over an engine dialect. leadFirst sends a
// request's first question alone before the rest when the state is new to
// the node, so that the others reuse its prefill: for engines whose
// prompt cache is per slot and which spread concurrent requests over
// slots. e makes each engine call through its context's gate
// (engine.Call, or engine.Admit and engine.Bound), as every dialect does,
// so that each call holds one of the node's slots while it runs and is
// bounded by the node's timeout.
func EngineBackend(e engine.Engine, leadFirst bool) Backend {
	return &engineBackend{e: e, leadFirst: leadFirst}
}

// UpstreamBackend is a backend over a System One endpoint: a request's
// questions go to it in one forwarded request.
func UpstreamBackend(c *systemone.Client) Backend {
	return &upstreamBackend{c, func(ctx context.Context, req decision.Request) (*forwarded, error) {
		reply, err := c.Ask(ctx, req)
		if err != nil {
			return nil, err
		}
		return &forwarded{dists: reply.Dists, declined: reply.Abstained, model: reply.Model,
			input: reply.Usage.InputTokens, output: reply.Usage.OutputTokens}, nil
	}}
}

type engineBackend struct {
	e         engine.Engine
	leadFirst bool
}

func (b *engineBackend) Models(ctx context.Context) ([]string, error) { return b.e.Models(ctx) }

func (b *engineBackend) ask(c *caller, req decision.Request) []answer {
	// A constrained node's first use probes its constraint once the
	// request's own calls are done, so the probe never takes a slot
	// they need.
	defer c.r.probeConstraint(c.n, b, req.Model)
	out := make([]answer, len(req.Questions))
	ask := func(ctx context.Context, j int) {
		start := c.r.now()
		// The question's calls are one attempt, traced under its question
		// (nothing when tracing is off).
		actx, span := tracing.StartAttempt(tracing.ForQuestion(ctx, req.Questions[j].ID), c.n.Name, req.Model, c.n.Dialect)
		ac := *c
		ac.ctx = actx
		orders := c.r.debias.orders(req, req.Questions[j])
		// Each of the question's engine calls (its rounds, its orders)
		// takes a slot of its own while it runs (see caller).
		o, err := engine.AskOrders(engine.WithSpread(ac.ctx, j), b.e, req.Model, req.State, req.Questions[j], orders)
		if err == nil && o.ConstraintFailed {
			c.r.constraintFailed(c.n, req.Model)
		}
		var prior decision.Distribution
		if err == nil && c.r.prior.mode(req) == decision.PriorContentFree {
			var extra engine.Outcome
			if prior, extra, err = askContentFree(&ac, b.e, req, j, orders); err == nil {
				o.InputTokens += extra.InputTokens
				o.OutputTokens += extra.OutputTokens
				o.Estimated = o.Estimated || extra.Estimated
			}
		}
		out[j] = c.result(start, o, "", err)
		tracing.EndAttempt(span, traced(out[j], o, req.Model))
		if prior != nil {
			out[j].Prior, out[j].PriorVersion = prior, decision.ContentFreeVersion
		}
	}
	llama, _ := b.e.(*llamacpp.Engine)
	// Engines cache prompt prefixes, but on an engine that spreads
	// concurrent requests over slots with a cache each, questions sent
	// together over a state the node has not seen would each prefill it.
	// There the first question goes alone, the state's prefill with it, and
	// the rest follow together to reuse it; over a state the node has just
	// seen, all go at once. Engines that share or pin the prefix get every
	// question at once.
	ctx, alone := c.ctx, 0 // the first alone questions go one after another
	switch {
	case llama != nil && engine.Throughput(c.ctx):
		// Row-wise work: the state holds a slot of its own and all its
		// questions go there one after another, the state prefilled
		// once, while other states keep the other slots busy.
		held, release, err := llama.Hold(c.ctx, req.State)
		if err != nil { // the request ended while it waited: no call was made
			for j := range out {
				out[j] = answer{err: failure(err)}
			}
			return out
		}
		defer release()
		ctx, alone = held, len(out)
	case b.leadFirst && len(out) > 1 && !c.warm:
		alone = 1
	}
	for j := range alone {
		ask(ctx, j)
		// A node that failed a question (down, hung, busy, asking for a
		// pause, answering garbage) is not sent the rest: they go on to
		// the next node at once. A question the engine refused as a bad
		// request, or one the model ranked no label of, says nothing of
		// the others.
		if f := out[j].err; f != nil && f.Kind != engine.Rejected && !f.Uninformative {
			for k := j + 1; k < len(out); k++ {
				out[k].err = f
			}
			return out
		}
	}
	if llama != nil && llama.SpreadSlots && len(out) > 1 && alone < len(out) {
		// Spread (spread_slots), each question has a slot of its own next
		// to the state's: the engine copies its idle slots into its prompt
		// cache and readies the slots the questions go to, before they go,
		// through the request's gate like any call. A failed prime costs
		// only the sharing: each question then prefills the state on its
		// own slot. But a node that did not answer it (timed out, down)
		// is not sent the questions, which fail with it and go on to the
		// next node at once, rather than wait the node's timeout again.
		start := c.r.now()
		if f := failure(llama.Prime(c.ctx, req.State, len(out))); f != nil && (f.Kind == engine.Timeout || f.Kind == engine.Unavailable) {
			for j := alone; j < len(out); j++ {
				out[j] = c.result(start, engine.Outcome{}, "", f)
			}
			return out
		}
	}
	// The last question is asked on this goroutine: a lone question, the
	// common case, then needs no goroutine handoff.
	var wg sync.WaitGroup
	for j := alone; j < len(out)-1; j++ {
		wg.Go(func() { ask(c.ctx, j) })
	}
	if alone < len(out) {
		ask(c.ctx, len(out)-1)
	}
	wg.Wait()
	return out
}

// labelKnower is an engine that can say which labels it would give a
// question without a call: the dialects whose labels are fixed, and
// llama.cpp once its tokenizer has been asked about the candidates.
type labelKnower interface {
	KnownLabels(model string, candidates []string, want int) ([]string, bool)
}

// Every dialect knows its labels (llama.cpp once asked).
var (
	_ labelKnower = (*llamacpp.Engine)(nil)
	_ labelKnower = (*ollama.Engine)(nil)
	_ labelKnower = (*openai.Engine)(nil)
)

// calls is the number of engine calls reading q of model once costs on an
// engine: the rounds engine.Ask goes in, from the node's per-call label
// cap and the labels the engine has for the options. Until llama.cpp's
// tokenizer has been asked about a model's candidates (the first question
// of that size), a label is assumed for every option; a model with fewer
// single-token labels goes in more rounds.
func (b *engineBackend) calls(model string, q decision.Question) int {
	opts := len(q.Options)
	per := b.e.Caps().PerCall
	if k, ok := b.e.(labelKnower); ok {
		if labels, ok := k.KnownLabels(model, engine.Candidates(q), opts); ok && len(labels) < opts && (per == 0 || len(labels) < per) {
			per = len(labels)
		}
	}
	return engine.Calls(opts, per)
}

// reads: only a choice's options go in rounds (engine.Ask), and a
// choice's rounds need at least two labels a call.
func (b *engineBackend) reads(q decision.Question) bool {
	per := b.e.Caps().PerCall
	if q.Kind == decision.Choice {
		return per <= 0 || per >= 2
	}
	return per <= 0 || len(q.Options) <= per
}

func (b *engineBackend) spends() string {
	if per := b.e.Caps().PerCall; per > 0 {
		return fmt.Sprintf("reads %d labels a call", per)
	}
	return "reads any number of labels a call"
}

// upstreamClient is what a backend needs of an upstream's client besides
// its answers: the models it serves and the identity of what it serves.
type upstreamClient interface {
	Models(ctx context.Context) ([]string, error)
	Identity(ctx context.Context, model string) (fingerprint.Identity, error)
}

// upstreamBackend is a backend over an upstream, a System One or a
// Decisions endpoint: send asks it a request's questions in one call.
type upstreamBackend struct {
	c    upstreamClient
	send func(context.Context, decision.Request) (*forwarded, error)
}

func (b *upstreamBackend) Models(ctx context.Context) ([]string, error) {
	models, err := b.c.Models(ctx)
	if f := failure(err); f != nil {
		return nil, f
	}
	return models, nil
}

// forwarded is what an upstream's one call for a request's questions
// came back with: each question's distribution, or why the upstream
// declined it, aligned with the questions; the model that answered and
// the tokens the call counted.
type forwarded struct {
	dists         []decision.Distribution
	declined      []string
	model         string
	input, output int
}

// ask sends a request's questions in one call through the request's
// gate, as one engine attempt: traced under the request, not one
// question, with the node, model, tokens and outcome any engine attempt
// has.
func (b *upstreamBackend) ask(c *caller, req decision.Request) []answer {
	start := c.r.now()
	actx, span := tracing.StartAttempt(c.ctx, c.n.Name, req.Model, c.n.Dialect)
	var reply *forwarded
	err := engine.Call(actx, func(ctx context.Context) (err error) {
		reply, err = b.send(ctx, req)
		return err
	})
	out := make([]answer, len(req.Questions))
	for j := range out {
		var o engine.Outcome
		declined := ""
		if err == nil {
			// The upstream's numbers are normalised over the options: how
			// much the model put on them at all is not known here.
			o = engine.Outcome{Dist: reply.dists[j], Mass: math.NaN(), Rounds: 1, Model: reply.model}
			if j == 0 { // the upstream counts the request as a whole
				o.InputTokens, o.OutputTokens = reply.input, reply.output
			}
			declined = reply.declined[j]
		}
		out[j] = c.result(start, o, declined, err)
		if j == 0 && err == nil { // the upstream bills the request once
			out[j].Requests = 1
		}
	}
	sum := answer{attempt: Attempt{Outcome: "ok"}}
	if len(out) > 0 {
		sum = out[0] // every question's attempt is the call's
	}
	o := engine.Outcome{Mass: math.NaN()}
	if reply != nil {
		o.Model, o.InputTokens, o.OutputTokens = reply.model, reply.input, reply.output
	}
	tracing.EndAttempt(span, traced(sum, o, req.Model))
	return out
}

// An upstream forwards a request's questions in one call, which the
// request pays (see requestCost): a question costs none of its own.
func (b *upstreamBackend) calls(string, decision.Question) int { return 0 }

func (b *upstreamBackend) reads(decision.Question) bool { return true }

func (b *upstreamBackend) spends() string { return "forwards a request in one call" }

// unusable is the backend of a node that cannot be asked, such as one
// whose key variable is named but not set: every call fails at once, with
// why, and nothing is sent.
type unusable struct{ why error }

func (b unusable) Models(context.Context) ([]string, error) { return nil, b.why }

func (b unusable) ask(c *caller, req decision.Request) []answer {
	out := make([]answer, len(req.Questions))
	for j := range out {
		out[j] = c.result(c.r.now(), engine.Outcome{}, "", &engine.Failure{Kind: engine.Unavailable, Err: b.why})
	}
	return out
}

// An unusable node makes no call.
func (unusable) calls(string, decision.Question) int { return 0 }

func (unusable) reads(decision.Question) bool { return true }

func (unusable) spends() string { return "makes no call" }

// caller runs one node's calls for one request, and records each result
// as an attempt. Its ctx carries the request's gate to the node
// (engine.WithGate), through which every engine call holds one of the
// node's slots for as long as it runs and is bounded by the node's
// timeout: a question of many rounds or orders takes a slot per call, and
// holds none between them.
type caller struct {
	ctx   context.Context
	r     *Router
	n     *Node
	model string
	// warm is set when the node answered a request over this state lately.
	warm bool
}

// result records one question's attempt on the node.
func (c *caller) result(start time.Time, o engine.Outcome, abstain string, err error) answer {
	at := Attempt{Node: c.n.Name, Outcome: "ok", Latency: c.r.now().Sub(start)}
	a := answer{Answered: Answered{Outcome: o, Abstain: abstain}, sent: true}
	if f := failure(err); f != nil {
		at.Outcome, at.Detail = f.Kind.String(), f.Error()
		a.err = f
		if f.Kind != engine.Canceled { // the caller gave up: not the node's
			c.n.errors.Add(1)
		}
	}
	a.attempt = at
	c.r.obs.Attempt(c.n.Name, c.model, at.Outcome, at.Latency)
	return a
}

// traced is what an attempt's span records of a question's answer a,
// whose outcome o is (for an upstream, the reply's model and usage), asked
// of model.
func traced(a answer, o engine.Outcome, model string) tracing.Attempt {
	t := tracing.Attempt{Outcome: a.attempt.Outcome, InputTokens: o.InputTokens, OutputTokens: o.OutputTokens, LabelMass: o.Mass}
	if a.err != nil { // a nil *engine.Failure is not a nil error
		t.Err = a.err
	}
	if o.Model != "" && o.Model != model {
		t.ResponseModel = o.Model
	}
	return t
}

// failure classifies any error from a node, engine or upstream, by one
// rule: an HTTP refusal by its status (engine.StatusFailure), a reply that
// fails the clients' checks as malformed (provoked by the question when
// only an answer failed them), anything else by engine.Classify.
func failure(err error) *engine.Failure {
	if err == nil {
		return nil // before the targets of errors.As, which live on the heap
	}
	var se *systemone.StatusError
	var de *decisionsapi.Error
	switch {
	case errors.As(err, &se):
		return engine.StatusFailure(se.Code, se.RetryAfter, se.Message)
	case errors.As(err, &de):
		f := engine.StatusFailure(de.Status, de.RetryAfter, de.Detail())
		f.ContextTooLong = f.ContextTooLong || (f.Kind == engine.Rejected && de.Code == decisionsapi.CodeContextLengthExceeded)
		return f
	case errors.Is(err, systemone.ErrMalformed), errors.Is(err, decisionsapi.ErrMalformed):
		var answer *decisionsapi.AnswerError
		return &engine.Failure{Kind: engine.Malformed, Provoked: errors.As(err, &answer), Err: err}
	}
	return engine.Classify(err)
}
