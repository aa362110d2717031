// Package engine is the decision core over language-model engines. It lays
// each question out as a prompt that starts with the shared state, gives
// every option a single-token label, asks an engine for one token's
// log-probabilities at temperature 0, and renormalises them over the labels
// into a distribution. Engine dialects (llama.cpp, Ollama, OpenAI-compatible)
// live in their own packages and implement Engine.
package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// Engine is one engine node speaking one dialect.
type Engine interface {
	// Read asks model for one token after the prompt and reports the first
	// token's log-probabilities of the labels the prompt asks for.
	Read(ctx context.Context, model string, p Prompt) (Reading, error)
	// Models lists the models the node serves.
	Models(ctx context.Context) ([]string, error)
	// Labels returns, in order, the first want candidates that are single
	// tokens of model's vocabulary (fewer when it has fewer): verified
	// where the engine has a tokenizer, else only those that are single
	// tokens in every vocabulary.
	Labels(ctx context.Context, model string, candidates []string, want int) ([]string, error)
	// Caps says how many labels one call can report and whether a call
	// can be held to a subset of the prompt's labels.
	Caps() Caps
}

// Caps are what one engine call can do.
type Caps struct {
	// PerCall is how many labels one call can report; 0 is no limit
	// (llama.cpp's n_probs can cover the whole vocabulary).
	PerCall int
	// Subsets is set when a call can be constrained to some of the
	// prompt's labels, so that rounds over more labels than PerCall can
	// share one prompt.
	Subsets bool
}

// Reading is what an engine reported of a prompt's labels.
type Reading struct {
	// Logprobs are the first token's log-probabilities, aligned with the
	// labels the prompt asked for; Found says which of them the engine
	// reported at all.
	Logprobs []float64
	Found    []bool
	// PreMask is set when the values are from before the engine's
	// constraint (llama.cpp, Ollama), so the mass on the labels means
	// something; post-mask engines renormalise over the allowed tokens.
	PreMask bool
	// ConstraintFailed is set when the engine was to hold the first token
	// to the labels but generated one that is not a label: the constraint
	// did not hold, and the values are read as from before it (PreMask).
	ConstraintFailed bool
	// Model is the model id the engine says answered.
	Model string
	// InputTokens and OutputTokens are the engine's own counts; Counted is
	// false when it reported none.
	InputTokens, OutputTokens int
	Counted                   bool
}

// SetCounts keeps the engine's own token counts where they are counts.
// A prompt of no tokens or a negative completion is not passed on: it
// would make system1's own usage report invalid, so Counted stays false.
func (r *Reading) SetCounts(input, output int) {
	if input > 0 && output >= 0 {
		r.InputTokens, r.OutputTokens, r.Counted = input, output, true
	}
}

// FailureKind classifies why a node did not answer, which decides what the
// router does next.
type FailureKind int

// Failure kinds.
const (
	Unavailable FailureKind = iota // refused, reset, 5xx, 404 for a claimed model: try another node
	Timeout                        // no answer in time: try another node
	RateLimited                    // 429: leave the node alone until RetryAfter
	Malformed                      // an answer that is not a usable reading: try another node
	Rejected                       // the engine refused the request itself (400, 501, context too long)
	Busy                           // the node's slots and queue are full: try another, no cooldown
	Canceled                       // the caller gave up: nothing is known of the node
)

func (k FailureKind) String() string {
	return [...]string{"unavailable", "timeout", "rate_limited", "malformed", "rejected", "busy", "canceled"}[k]
}

// Failure is a node's failure to answer, classified.
type Failure struct {
	Kind       FailureKind
	Status     int           // HTTP status, when there was one
	RetryAfter time.Duration // RateLimited: how long the node asked for
	Err        error
	// Uninformative marks a well-formed reading that gave none of the
	// labels any probability (none was among the alternatives the engine
	// reported): the model's limit over this prompt, not a fault of the
	// node, so it fails the question without counting against the node.
	Uninformative bool
	// ContextTooLong marks a rejection of a prompt longer than the
	// model's context (contextRefusals): the caller's, which a wire may
	// name as such (OpenAI's context_length_exceeded).
	ContextTooLong bool
	// Provoked marks a reply whose shape the request's question provoked
	// (an upstream's answer to it that fails the clients' checks): it
	// fails the question, which moves on to the next node, without
	// counting against the node, so that one caller's question cannot
	// cool the node for every caller.
	Provoked bool
}

func (f *Failure) Error() string {
	if f.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d): %v", f.Kind, f.Status, f.Err)
	}
	return fmt.Sprintf("%s: %v", f.Kind, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Classify turns any error from talking to a node into a *Failure.
func Classify(err error) *Failure {
	var f *Failure
	switch {
	case err == nil:
		return nil
	case errors.As(err, &f):
		return f
	case errors.Is(err, context.Canceled):
		return &Failure{Kind: Canceled, Err: err}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return &Failure{Kind: Timeout, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Failure{Kind: Timeout, Err: err}
	}
	return &Failure{Kind: Unavailable, Err: err}
}

// StatusFailure classifies an HTTP status that is not 200.
func StatusFailure(status int, retryAfter time.Duration, msg string) *Failure {
	f := &Failure{Status: status, RetryAfter: retryAfter, Err: errors.New(msg)}
	switch {
	case status == 429 || status == 529:
		f.Kind = RateLimited
	case status == 400 || status == 413 || status == 422 || status == 501:
		// 501: the engine cannot serve this request for the model (vLLM,
		// llama.cpp and LocalAI without decision support): it will not
		// change on a retry, so it is the request's, which the wires
		// answer with a 4xx that the SDKs do not retry.
		f.Kind = Rejected
		lower := strings.ToLower(msg)
		f.ContextTooLong = slices.ContainsFunc(contextRefusals, func(r string) bool { return strings.Contains(lower, r) })
	case status == 408 || status == 504:
		f.Kind = Timeout
	default: // 404 for a claimed model, 5xx, anything else
		f.Kind = Unavailable
	}
	return f
}

// contextRefusals are how engines word a prompt longer than the model's
// context (docs/limits.md), lower-cased: llama-server, vLLM and hosted
// OpenAI, Ollama, SGLang, and OpenAI's code, which another system1's
// /v1/decisions and the hosted APIs send.
var contextRefusals = []string{
	"exceeds the available context size",
	"maximum context length",
	"exceeds the context length",
	"longer than the model's context length",
	"context_length_exceeded",
}
