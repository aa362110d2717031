// Package fakeengine is a fake language-model engine for tests: an HTTP
// server that speaks each dialect system1 talks to (llama.cpp's
// llama-server, the OpenAI chat API, Ollama's native API), answers every
// prompt with a known distribution over the labels it was asked for,
// records what it was sent, and misbehaves on command.
//
// The fake reads the labels from the request the way an engine would have
// to: from the constraint where one is sent (vLLM's structured_outputs or
// guided_choice), else from the labelled option lines ("A. billing") that
// follow the question in the prompt system1 writes. It answers with the
// log-probabilities of Behavior.Logprobs, Halving by default, and gives the
// mass left over to a token that is not a label, as an engine reporting
// values from before its constraint does (llama.cpp, Ollama, an
// unconstrained OpenAI API); under a vLLM constraint it reports values
// after it, renormalised over the labels, unless told to ignore the
// constraint (Behavior.IgnoreConstraint).
//
// Faults apply to the inference endpoint only (llama.cpp and OpenAI
// POST /v1/chat/completions, Ollama POST /api/chat), unless
// Behavior.Everywhere is set; Refuse always applies to the whole server.
package fakeengine

import (
	"math"
	"slices"
	"time"
)

// Dialect is an engine API the fake speaks.
type Dialect string

// The dialects, named as system1's configuration names them.
const (
	LlamaCpp Dialect = "llamacpp"
	OpenAI   Dialect = "openai"
	Ollama   Dialect = "ollama"
)

// DefaultModel is the model the fake serves unless Options.Models says
// otherwise.
const DefaultModel = "fake"

// Fault is a way the engine misbehaves.
type Fault string

// The faults. Those about one label hit the label at Behavior.Label.
const (
	None    Fault = ""
	Refuse  Fault = "refuse"   // the listener is closed: connections are refused
	Hang    Fault = "hang"     // the request is read and never answered, until the client gives up
	Status  Fault = "status"   // an error body with Behavior.Status (and Retry-After from Behavior.RetryAfter)
	NotJSON Fault = "not-json" // 200 with an HTML body
	Stall   Fault = "stall"    // 200 and half the body, then nothing until the client gives up

	NoLogprobs   Fault = "no-logprobs"   // valid JSON without logprobs
	NullLogprobs Fault = "null-logprobs" // "logprobs": null
	EmptyChoices Fault = "empty-choices" // "choices": [] (Ollama: "logprobs": [])

	NullLogprob    Fault = "null-logprob"    // the label's logprob is null, as llama.cpp writes a NaN
	NaN            Fault = "nan"             // the label's logprob is the literal NaN, as Python's json writes it
	PosInf         Fault = "+inf"            // the literal Infinity
	NegInf         Fault = "-inf"            // the literal -Infinity
	Positive       Fault = "positive"        // the label's logprob is 0.5, not a log-probability
	MissingLabel   Fault = "missing-label"   // the label is left out of the top log-probabilities
	DuplicateLabel Fault = "duplicate-label" // the label's entry appears twice
)

// Behavior is how the fake answers. The zero value answers correctly with
// the Halving distribution and reports token counts.
type Behavior struct {
	Fault Fault
	// Status is the HTTP status of a Status fault: 404 answers "model not
	// found", 429 adds RetryAfter.
	Status int
	// RetryAfter is sent as the Retry-After header with a Status fault.
	RetryAfter string
	// Message, when set, is a Status fault's error text, as the engine
	// words it (llama.cpp's context refusal, say).
	Message string
	// Label is the index of the label a per-label fault hits.
	Label int
	// Latency delays each answer on the routes faults apply to, faulty
	// or not; a client that gives up first ends the request.
	Latency time.Duration
	// Logprobs gives the log-probability of each label; nil is Halving.
	// A label given -Inf is left out of the top log-probabilities.
	Logprobs func(labels []string) []float64
	// Prompted, when set, gives them from the whole request instead, the
	// prompt included (prompted.go).
	Prompted func(r Request) []float64
	// NoUsage leaves the token counts out of the reply.
	NoUsage bool
	// Everywhere applies the fault and the latency to every route, not
	// just inference: model lists, the tokenizer and health too.
	Everywhere bool
	// Shift moves each label's log-probability by a fixed pseudo-random
	// amount in [-Shift, Shift], the same for every call of one prompt
	// and label (a hash of both and ShiftSeed): the same weights
	// re-quantized, every identity field unchanged.
	Shift     float64
	ShiftSeed uint64
	// Jitter adds fresh noise in [-Jitter, Jitter] to each label's
	// log-probability on every call: an engine whose arithmetic varies
	// with the batch it runs in.
	Jitter float64
	// IgnoreConstraint answers a request that names vLLM's
	// structured_outputs or guided_choice as vLLM >= 0.12 answers
	// guided_choice: as if it were not there, with values from before any
	// mask and the likeliest token generated, a label or not.
	IgnoreConstraint bool
}

// Halving is the default distribution: the first label has probability
// 1/2, the next 1/4, and so on, before renormalisation over the labels.
// Over n labels system1 therefore reports p_i = 2^(n-1-i) / (2^n - 1):
// 2/3 and 1/3 for two labels, 4/7, 2/7 and 1/7 for three.
func Halving(labels []string) []float64 {
	lp := make([]float64, len(labels))
	for i := range lp {
		lp[i] = -float64(i+1) * math.Ln2
	}
	return lp
}

// Uniform gives every label the same probability, 1/n.
func Uniform(labels []string) []float64 {
	return slices.Repeat([]float64{-math.Log(float64(len(labels)))}, len(labels))
}

// Probs returns a distribution giving the i-th label probability p[i]
// and labels beyond p none (they are left out of the top
// log-probabilities).
func Probs(p ...float64) func([]string) []float64 {
	return func(labels []string) []float64 {
		lp := slices.Repeat([]float64{math.Inf(-1)}, len(labels))
		for i := range min(len(p), len(lp)) {
			lp[i] = math.Log(p[i])
		}
		return lp
	}
}

// ByLabel gives each label the probability p[label], whichever labels a
// call asks for, as one softmax over a vocabulary does; labels not in p
// are left out of the top log-probabilities.
func ByLabel(p map[string]float64) func([]string) []float64 {
	return func(labels []string) []float64 {
		lp := slices.Repeat([]float64{math.Inf(-1)}, len(labels))
		for i, l := range labels {
			if v, ok := p[l]; ok {
				lp[i] = math.Log(v)
			}
		}
		return lp
	}
}
