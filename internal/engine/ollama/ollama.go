// Package ollama speaks Ollama's native chat API with log-probabilities.
// Ollama reports the raw softmax of the first token, before any format
// constraint, so the mass on the labels means something; it reports at
// most 20 alternatives and no token ids, so labels are matched by text and
// a label outside the top 20 is reported as not found.
package ollama

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"system1/internal/engine"
	"system1/internal/engine/openai"
)

// topLogprobs is the most alternatives Ollama returns; it answers 400 to
// more.
const topLogprobs = 20

// Engine is one Ollama server, or a proxy in front of one that wants Key
// as a bearer token.
type Engine struct {
	BaseURL string
	Key     string
	HTTP    *http.Client
	// NumCtx is the context in tokens to run the model with; 0 leaves it
	// to Ollama (4096, clamped to the model's own).
	NumCtx int
}

var _ engine.Engine = (*Engine)(nil)

// chatRequest is the part of Ollama's /api/chat request system1 sends.
type chatRequest struct {
	Model       string           `json:"model"`
	Messages    []openai.Message `json:"messages"`
	Think       bool             `json:"think"`
	Stream      bool             `json:"stream"`
	Logprobs    bool             `json:"logprobs"`
	TopLogprobs int              `json:"top_logprobs"`
	// Truncate is always false: Ollama's default (true) drops the start
	// of a prompt longer than the context, the system message and the
	// state with it, and answers 200 over what is left. Refused instead,
	// the prompt comes back as a 400 "the input length exceeds the
	// context length", which is the caller's (see engine.StatusFailure).
	Truncate bool    `json:"truncate"`
	Options  options `json:"options"`
}

type options struct {
	Temperature float64 `json:"temperature"`
	NumPredict  int     `json:"num_predict"`
	NumCtx      int     `json:"num_ctx,omitempty"`
}

// chatResponse is the part of Ollama's /api/chat reply system1 reads. Its
// logprobs entries have the OpenAI field names, without ids.
type chatResponse struct {
	Model           string                   `json:"model"`
	Message         struct{ Content string } `json:"message"`
	Logprobs        []openai.TokenLogprob    `json:"logprobs"`
	PromptEvalCount *int                     `json:"prompt_eval_count"`
	EvalCount       *int                     `json:"eval_count"`
}

// Read asks for one token at temperature 0 with thinking off and no
// format, since a format constraint makes the first token a quote rather
// than the label, as one engine call (engine.Call).
func (e *Engine) Read(ctx context.Context, model string, p engine.Prompt) (engine.Reading, error) {
	req := chatRequest{
		Model:       model,
		Messages:    openai.Messages(p.System, p.User()),
		Logprobs:    true,
		TopLogprobs: topLogprobs,
		Options:     options{Temperature: 0, NumPredict: 1, NumCtx: e.NumCtx},
	}
	var reply chatResponse
	if err := engine.Call(ctx, func(ctx context.Context) error {
		return openai.Post(ctx, e.HTTP, e.url("/api/chat"), e.Key, req, &reply)
	}); err != nil {
		return engine.Reading{}, err
	}
	// Ollama sends no logprobs for an end-of-sequence token: the model
	// ended its reply at once, which is no label. That is the prompt's
	// doing, not the node's: read as a token with no alternatives, it is
	// a reading that ranks none, as the other engines give, which fails
	// the question alone.
	tok := &openai.TokenLogprob{}
	switch {
	case len(reply.Logprobs) > 0:
		tok = &reply.Logprobs[0]
	case reply.Message.Content != "":
		// Ollama before 0.12.11 sends none.
		return engine.Reading{}, &engine.Failure{Kind: engine.Malformed, Err: errors.New("no logprobs in the reply")}
	}
	r, err := openai.TokenReading(tok, openai.TextLabels(p.Asked()), true)
	if err != nil {
		return engine.Reading{}, err
	}
	if err := uncut(reply.PromptEvalCount, e.NumCtx); err != nil {
		return engine.Reading{}, err
	}
	r.Model = reply.Model
	// A count of 0 prompt tokens (Ollama omits a 0: one sent is no count)
	// or a negative one is not a count: it is left out rather than passed
	// on into system1's own usage report (SetCounts), which estimates it.
	if reply.PromptEvalCount != nil {
		output := 0
		if reply.EvalCount != nil {
			output = *reply.EvalCount
		}
		r.SetCounts(*reply.PromptEvalCount, output)
	}
	return r, nil
}

// Models lists the names of GET /api/tags.
func (e *Engine) Models(ctx context.Context) ([]string, error) {
	var list struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if err := openai.Get(ctx, e.HTTP, e.url("/api/tags"), e.Key, openai.DefaultMaxBody, &list); err != nil {
		return nil, err
	}
	names := make([]string, len(list.Models))
	for i, m := range list.Models {
		names[i] = m.Name
	}
	return names, nil
}

// Labels keeps capital letters and digits. Ollama has no public tokenizer
// endpoint, so nothing can be checked; these are one token in every
// vocabulary we know, and a label that is not would only come back as not
// found.
func (e *Engine) Labels(ctx context.Context, model string, candidates []string, want int) ([]string, error) {
	return openai.SafeLabels(candidates, want), nil
}

// Caps: Ollama reports at most 20 alternatives and cannot hold a call to
// some of the labels (its only constraint is a JSON format).
func (e *Engine) Caps() engine.Caps { return engine.Caps{PerCall: topLogprobs} }

func (e *Engine) url(path string) string { return strings.TrimRight(e.BaseURL, "/") + path }
