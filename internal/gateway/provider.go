package gateway

import (
	"encoding/json"
	"fmt"

	"system1/internal/answer"
	"system1/internal/decision"
)

// query is one decision as a link of the chain asks it: the request's
// question, options, context, debias, prior and none_option.
type query Request

// asked is how many options the model is asked over: the answers, and
// the implicit one when none_option is set.
func (q query) asked() int {
	if q.NoneOption {
		return len(q.Answers()) + 1
	}
	return len(q.Answers())
}

// optionsAsked says how many options the model is asked over, for a
// message: the implicit one named, as the caller sent one fewer.
func (q query) optionsAsked() string {
	if q.NoneOption {
		return fmt.Sprintf("%d options (%d and the implicit none option)", q.asked(), len(q.Answers()))
	}
	return fmt.Sprintf("%d options", q.asked())
}

// YesNo reports whether the query is answered yes or no.
func (q query) YesNo() bool { return q.Options == nil }

// Answers are what the distribution of a reading is over: the options,
// or yes and no.
func (q query) Answers() []string {
	if q.YesNo() {
		return []string{"yes", "no"}
	}
	return q.Options
}

// noContext is the state the nodes get when the caller gave no context.
var noContext = json.RawMessage(`"(no context was given; answer from the question alone)"`)

// request maps the query to a decision request for model: a choice
// question whose criteria are the options, or a noul (P(true) is yes), over
// the context as the state.
func (q query) request(model string) decision.Request {
	instr, _ := json.Marshal(q.Question) // a Go string always marshals
	dq := decision.Question{ID: "decision", Kind: decision.Noul, Instructions: instr}
	if q.YesNo() {
		dq.Options = decision.NoulOptions(nil, nil)
	} else {
		dq.Kind = decision.Choice
		for _, o := range q.Options {
			dq.Options = append(dq.Options, decision.Option{Key: o, Name: o})
		}
		if q.NoneOption {
			dq.Options = append(dq.Options, decision.Option{Key: decision.NoneOption, Name: decision.NoneOption})
		}
	}
	state := q.Context
	if len(state) == 0 {
		state = noContext
	}
	return decision.Request{Model: model, State: state, Questions: []decision.Question{dq}, Debias: q.Debias, Prior: q.Prior}
}

// Kind is the question kind the query is asked as, for calibration.
func (q query) Kind() decision.Kind {
	if q.YesNo() {
		return decision.Noul
	}
	return decision.Choice
}

// reading is a link's answer to a query: the answer path's answer and its
// one question, whose Dist is over q.Answers() (the implicit option last)
// and nil when the node declined without a reading (Refusal says why).
type reading struct {
	answer.Question
	// answer is the whole answer: its Cost, calibration, fits and cache
	// state are the request's, not the question's.
	answer *answer.Answer
	// Detail is a note for the attempt's record.
	Detail string
}

// declined is the attempt's detail for a reading the node would not
// stand behind: the refusal's words, said to come from the cache on a
// hit, as an answer's detail says it.
func (r reading) declined() string {
	if r.answer != nil && r.answer.Cache == answer.CacheHit {
		return "answered from the cache, the same request's answer: " + r.Refusal.Detail
	}
	return r.Refusal.Detail
}

// failure is a link's failure to answer.
type failure struct {
	// outcome is OutcomeTimeout, OutcomeError or OutcomeMalformed.
	outcome string
	// caller is set when the engine refused the request itself: the
	// caller's error, which no other link is asked to repeat.
	caller bool
	err    error
	// raw is the failure as the node gave it, addresses and all, for the
	// log; nil when err is all there is.
	raw error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// logged is the failure as the operator's log shows it.
func (f *failure) logged() error {
	if f.raw != nil {
		return f.raw
	}
	return f.err
}

// ProviderCapabilities are what a provider kind, or one provider, can do.
type ProviderCapabilities struct {
	YesNo         bool   `json:"yes_no" jsonschema:"Answers yes/no questions (no options)."`
	Choice        bool   `json:"choice" jsonschema:"Chooses among options."`
	MaxOptions    int    `json:"max_options" jsonschema:"The most options it takes; over it, the provider is skipped."`
	Probabilities bool   `json:"probabilities" jsonschema:"Reports a probability per option."`
	Abstains      bool   `json:"abstains" jsonschema:"May abstain on its own, besides the gateway's threshold."`
	Calibration   bool   `json:"calibration" jsonschema:"Its probabilities can be calibrated with a fitted temperature."`
	Note          string `json:"note,omitempty" jsonschema:"More about the kind or provider."`
}

// KindInfo describes a provider kind.
type KindInfo struct {
	Kind         string               `json:"kind"`
	Description  string               `json:"description"`
	Capabilities ProviderCapabilities `json:"capabilities"`
}

// Kinds are the provider kinds the gateway knows, with what each declares
// it can do.
var Kinds = []KindInfo{
	{
		Kind:        "engine",
		Description: "system1's own core over the configured engine nodes (llama.cpp, Ollama, vLLM and other OpenAI-compatible servers) serving a model: each option gets a one-token label and the probabilities are the model's own, renormalised over the labels.",
		Capabilities: ProviderCapabilities{YesNo: true, Choice: true, MaxOptions: MaxOptions, Probabilities: true, Calibration: true,
			Note: "max_options is the largest option cap (max_options) of the nodes serving the model, 255 unless configured, and at most the provider's own max_options."},
	},
	{
		Kind:        "systemone",
		Description: "Any System One endpoint (POST /v1/systemone): hosted Jev with TYPESAFE_API_KEY, laya-serve, vLLM's or llama.cpp's native route, or another system1 serve.",
		Capabilities: ProviderCapabilities{YesNo: true, Choice: true, MaxOptions: MaxOptions, Probabilities: true, Abstains: true, Calibration: true,
			Note: "max_options comes from the configuration (Laya: 20); abstains when the endpoint marks its answer abstained (laya-serve's abstention gate)."},
	},
}

// ProviderInfo describes one provider of the chain.
type ProviderInfo struct {
	Name         string               `json:"name"`
	Kind         string               `json:"kind"`
	Model        string               `json:"model"`
	Role         string               `json:"role" jsonschema:"primary (first in the chain) or fallback."`
	URL          string               `json:"url,omitempty" jsonschema:"The endpoint (systemone providers)."`
	TimeoutMS    int64                `json:"timeout_ms" jsonschema:"Per-attempt timeout, in milliseconds."`
	Capabilities ProviderCapabilities `json:"capabilities"`
	Problem      string               `json:"problem,omitempty" jsonschema:"Why the provider cannot be used now, if known without asking it."`
}
