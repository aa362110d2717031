// Package openai speaks the OpenAI-compatible chat completions API with
// logprobs, as vLLM, SGLang, llama.cpp's llama-server and hosted APIs serve
// it, including the vendor extensions those engines accept for
// constraining the first token.
package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	fastjson "github.com/segmentio/encoding/json"

	"system1/internal/engine"
	"system1/internal/httpcall"
)

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Messages are the conversation system1 sends for a prompt: one system
// and one user message.
func Messages(system, user string) []Message {
	return []Message{{Role: "system", Content: system}, {Role: "user", Content: user}}
}

// Chat is the chat request for the two messages with the template's
// thinking off. Every chat call starts from it, and llama.cpp's
// /apply-template is asked with it, so that the template learnt renders
// what the chat endpoint evaluates.
func Chat(model, system, user string) ChatRequest {
	return ChatRequest{Model: model, Messages: Messages(system, user), ChatTemplateKwargs: map[string]any{"enable_thinking": false}}
}

// ChatRequest is a chat completion request asking for one token with its
// log-probabilities. The fields after Stream are extensions, sent only by
// dialects whose engine accepts them.
type ChatRequest struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	MaxTokens   int       `json:"max_tokens"`
	Temperature float64   `json:"temperature"`
	Logprobs    bool      `json:"logprobs"`
	TopLogprobs int       `json:"top_logprobs,omitempty"`
	Stream      bool      `json:"stream"`

	// llama.cpp: a GBNF grammar, reuse of the cached prompt prefix, and
	// the slot to run in.
	Grammar     string `json:"grammar,omitempty"`
	CachePrompt bool   `json:"cache_prompt,omitempty"`
	IDSlot      *int   `json:"id_slot,omitempty"`
	// vLLM (>= 0.12): constrain the output to one of the strings.
	StructuredOutputs *StructuredOutputs `json:"structured_outputs,omitempty"`
	// vLLM before 0.12 and SGLang's older releases.
	GuidedChoice []string `json:"guided_choice,omitempty"`
	// vLLM, SGLang and llama.cpp: template switches, here thinking off.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
}

// StructuredOutputs is vLLM's constraint object.
type StructuredOutputs struct {
	Choice []string `json:"choice"`
}

// ChatResponse is the part of a chat completion system1 reads.
type ChatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Logprobs *struct {
			Content []TokenLogprob `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// TokenLogprob is one generated token with its top alternatives. ID is a
// llama.cpp extension; Logprob is a pointer because llama.cpp writes a NaN
// as null.
type TokenLogprob struct {
	ID          *int           `json:"id,omitempty"`
	Token       string         `json:"token"`
	Logprob     *float64       `json:"logprob"`
	TopLogprobs []TokenLogprob `json:"top_logprobs"`
}

// Label is a label to find among the top log-probabilities: by token id
// where the engine reports ids (ID >= 0), else by its text.
type Label struct {
	Text string
	ID   int
}

// TextLabels are labels matched by their text alone, for engines that
// report no token ids.
func TextLabels(texts []string) []Label {
	labels := make([]Label, len(texts))
	for i, t := range texts {
		labels[i] = Label{Text: t, ID: -1}
	}
	return labels
}

// matches reports whether t is label l: by id where l has one, else by
// its text.
func (l Label) matches(t *TokenLogprob) bool {
	if l.ID >= 0 {
		return t.ID != nil && *t.ID == l.ID
	}
	return t.Token == l.Text
}

// FirstToken returns the first generated token's entry.
func (r *ChatResponse) FirstToken() (*TokenLogprob, error) {
	if len(r.Choices) == 0 {
		return nil, fmt.Errorf("no choices in the reply")
	}
	lp := r.Choices[0].Logprobs
	if lp == nil || len(lp.Content) == 0 {
		return nil, fmt.Errorf("no logprobs in the reply; does the engine support them?")
	}
	return &lp.Content[0], nil
}

// massTolerance is how far above 1 the reported top-k may sum before the
// values are not probabilities.
const massTolerance = 1e-3

// maxLogprob is the largest value read as a log-probability: 0 up to the
// rounding of a float32 softmax, as decision.FromLogprobs accepts.
const maxLogprob = 1e-4

// Read finds each label's log-probability among a token's alternatives.
// A label matched by id must appear at most once. Labels matched by text
// sum every entry with that text: distinct tokens that spell the label
// (byte-fallback tokens do) all produce it. Values that are not
// log-probabilities (null, which is how llama.cpp writes NaN, or above 0
// by more than float32 rounding) or that sum above 1 fail the reading
// rather than being repaired.
func Read(tok *TokenLogprob, labels []Label) (lp []float64, found []bool, err error) {
	lp = make([]float64, len(labels))
	found = make([]bool, len(labels))
	for i := range lp {
		lp[i] = math.Inf(-1)
	}
	var mass float64
	for _, t := range tok.TopLogprobs {
		if t.Logprob == nil {
			return nil, nil, fmt.Errorf("token %q has no logprob (NaN?)", t.Token)
		}
		v := *t.Logprob
		if math.IsNaN(v) || v > maxLogprob {
			return nil, nil, fmt.Errorf("token %q has logprob %v, not a log-probability", t.Token, v)
		}
		mass += math.Exp(math.Min(v, 0))
		for i, l := range labels {
			switch {
			case !l.matches(&t):
			case !found[i]:
				lp[i], found[i] = v, true
			case l.ID >= 0:
				return nil, nil, fmt.Errorf("label %q (token %d) appears twice in the top logprobs", l.Text, l.ID)
			default:
				// At most 1: a sum the tolerance lets over it is rounding.
				lp[i] = math.Min(logAdd(lp[i], v), 0)
			}
		}
	}
	if mass > 1+massTolerance {
		return nil, nil, fmt.Errorf("top logprobs sum to probability %.4f > 1", mass)
	}
	// The generated token's own value is reported even when it is not among
	// the alternatives (a grammar or constraint can force a label the model ranks low);
	// it is the same raw value, so it counts as reported.
	if tok.Logprob != nil && !math.IsNaN(*tok.Logprob) {
		for i, l := range labels {
			if !found[i] && l.matches(tok) {
				if *tok.Logprob > maxLogprob {
					return nil, nil, fmt.Errorf("token %q has logprob %v, not a log-probability", tok.Token, *tok.Logprob)
				}
				lp[i], found[i] = *tok.Logprob, true
			}
		}
	}
	return lp, found, nil
}

// Floor is the n-th highest log-probability among a token's alternatives,
// the smallest when n or fewer are reported: a label not among the top n
// has a log-probability below it. -Inf when there are none.
func Floor(tok *TokenLogprob, n int) float64 {
	top := make([]float64, 0, len(tok.TopLogprobs))
	for _, t := range tok.TopLogprobs {
		if t.Logprob != nil {
			top = append(top, *t.Logprob)
		}
	}
	switch {
	case len(top) == 0:
		return math.Inf(-1)
	case n <= 0 || len(top) <= n:
		return slices.Min(top)
	}
	slices.Sort(top)
	return top[len(top)-n]
}

func logAdd(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// Post sends a JSON request and decodes a JSON reply of at most
// DefaultMaxBody, classifying every failure for the router. A nil hc is
// http.DefaultClient.
func Post(ctx context.Context, hc *http.Client, url, key string, req, reply any) error {
	data, err := PostBody(ctx, hc, url, key, req)
	return decode(data, err, reply)
}

// PostBody is Post for a caller that decodes the reply itself: it
// returns the reply's body.
func PostBody(ctx context.Context, hc *http.Client, url, key string, req any) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &engine.Failure{Kind: engine.Rejected, Err: err}
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &engine.Failure{Kind: engine.Rejected, Err: err}
	}
	hr.Header.Set("Content-Type", "application/json")
	return send(hc, hr, key, DefaultMaxBody)
}

// Get reads url with GET into reply, of at most limit bytes
// (fingerprint.MaxReply for an identity's, engine.Identifier): a call that
// runs no model, bounded by the node's timeout (engine.Bound) without
// taking a slot.
func Get(ctx context.Context, hc *http.Client, url, key string, limit int64, reply any) error {
	ctx, cancel := engine.Bound(ctx)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	data, err := send(hc, hr, key, limit)
	return decode(data, err, reply)
}

// Unmarshal reads an engine's reply body into reply as encoding/json
// would (FuzzUnmarshalAsEncodingJSON holds it to that), with segmentio's
// decoder: a reply carries the first token's top log-probabilities, and
// reading them with encoding/json was 15% of a bulk row's CPU; segmentio
// reads them 2.8 times as fast.
func Unmarshal(data []byte, reply any) error { return fastjson.Unmarshal(data, reply) }

// decode decodes a reply's body unless sending it failed.
func decode(data []byte, err error, reply any) error {
	if err != nil {
		return err
	}
	if err := Unmarshal(data, reply); err != nil {
		return &engine.Failure{Kind: engine.Malformed, Status: http.StatusOK, Err: fmt.Errorf("reply is not the expected JSON: %v", err)}
	}
	return nil
}

// send sends hr and returns the body of a successful reply of at most
// limit bytes, classifying what went wrong as an engine failure.
func send(hc *http.Client, hr *http.Request, key string, limit int64) ([]byte, error) {
	data, err := httpcall.Do(hc, hr, key, limit)
	var se *httpcall.StatusError
	switch {
	case errors.As(err, &se):
		return nil, engine.StatusFailure(se.Code, se.RetryAfter, errorText(se.Body))
	case errors.Is(err, httpcall.ErrTooLarge):
		return nil, &engine.Failure{Kind: engine.Malformed, Err: err}
	case err != nil:
		return nil, engine.Classify(err)
	}
	return data, nil
}

// errorText pulls the message out of an OpenAI-style error body.
func errorText(data []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		var s string
		if json.Unmarshal(e.Error, &s) == nil {
			return s
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &o) == nil && o.Message != "" {
			return o.Message
		}
	}
	return httpcall.Excerpt(data)
}

// Engine is a node serving the OpenAI-compatible chat API: vLLM, SGLang,
// hosted APIs. Without a tokenizer endpoint, labels are taken as single
// tokens (capital letters and digits are, in every vocabulary we know) and
// matched by text.
type Engine struct {
	BaseURL string // the server root; /v1 is added when missing
	Key     string
	HTTP    *http.Client
	// TopLogprobs is how many alternatives the engine returns at most
	// (OpenAI and vLLM's default: 20).
	TopLogprobs int
	// Constrain is how the first token is held to the labels:
	// "structured_outputs" (vLLM >= 0.12), "guided_choice" (older vLLM,
	// SGLang) or "" or "none" for none (hosted APIs, which refuse unknown
	// fields).
	Constrain string
}

var _ engine.Engine = (*Engine)(nil)

func (e *Engine) url(path string) string {
	u := strings.TrimRight(e.BaseURL, "/")
	if !strings.HasSuffix(u, "/v1") {
		u += "/v1"
	}
	return u + path
}

// Read asks for one token at temperature 0 with thinking off, as one
// engine call (engine.Call).
func (e *Engine) Read(ctx context.Context, model string, p engine.Prompt) (engine.Reading, error) {
	req := Chat(model, p.System, p.User())
	req.MaxTokens, req.Logprobs, req.TopLogprobs = 1, true, e.topLogprobs()
	asked := p.Asked()
	switch e.Constrain {
	case "structured_outputs":
		req.StructuredOutputs = &StructuredOutputs{Choice: asked}
	case "guided_choice":
		req.GuidedChoice = asked
	default:
		req.ChatTemplateKwargs = nil // hosted APIs refuse fields they do not know
	}
	var reply ChatResponse
	if err := engine.Call(ctx, func(ctx context.Context) error {
		return Post(ctx, e.HTTP, e.url("/chat/completions"), e.Key, req, &reply)
	}); err != nil {
		return engine.Reading{}, err
	}
	return Reading(&reply, TextLabels(asked), !e.constrained())
}

// Reading turns a chat reply into a reading of the labels.
func Reading(reply *ChatResponse, labels []Label, preMask bool) (engine.Reading, error) {
	tok, err := reply.FirstToken()
	if err != nil {
		return engine.Reading{}, &engine.Failure{Kind: engine.Malformed, Err: err}
	}
	r, err := TokenReading(tok, labels, preMask)
	if err != nil {
		return r, err
	}
	r.Model = reply.Model
	if reply.Usage != nil {
		r.SetCounts(reply.Usage.PromptTokens, reply.Usage.CompletionTokens)
	}
	return r, nil
}

// TokenReading reads labels from the first generated token's entry, of a
// chat reply or of one prompt of llama.cpp's /completion.
func TokenReading(tok *TokenLogprob, labels []Label, preMask bool) (engine.Reading, error) {
	lp, found, err := Read(tok, labels)
	if err != nil {
		return engine.Reading{}, &engine.Failure{Kind: engine.Malformed, Err: err}
	}
	r := engine.Reading{Logprobs: lp, Found: found, PreMask: preMask}
	// A constrained engine that generated a token that is no label did not
	// hold the constraint (vLLM >= 0.12 ignores guided_choice with only a
	// log warning): its values are from before any mask, so they are read
	// as such, the label mass with them, and the answer says so.
	if !preMask && !slices.ContainsFunc(labels, func(l Label) bool { return l.matches(tok) }) {
		r.PreMask, r.ConstraintFailed = true, true
	}
	return r, nil
}

// Models lists the ids of GET /v1/models.
func (e *Engine) Models(ctx context.Context) ([]string, error) {
	return ListModels(ctx, e.HTTP, e.url("/models"), e.Key)
}

// ListModels reads an OpenAI-style model list (Get).
func ListModels(ctx context.Context, hc *http.Client, url, key string) ([]string, error) {
	var list struct {
		Data []struct {
			ID      string   `json:"id"`
			Aliases []string `json:"aliases"` // llama.cpp
		} `json:"data"`
	}
	if err := Get(ctx, hc, url, key, DefaultMaxBody, &list); err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range list.Data {
		for _, id := range append([]string{m.ID}, m.Aliases...) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// Labels keeps the single-character candidates, capital letters and
// digits: the API has no tokenizer, and these are single tokens in every
// vocabulary we know.
func (e *Engine) Labels(ctx context.Context, model string, candidates []string, want int) ([]string, error) {
	return SafeLabels(candidates, want), nil
}

// SafeLabels keeps the first want candidates that are one capital letter
// or one digit.
func SafeLabels(candidates []string, want int) []string {
	var out []string
	for _, c := range candidates {
		if len(out) == want {
			break
		}
		if len(c) == 1 && (c[0] >= 'A' && c[0] <= 'Z' || c[0] >= '0' && c[0] <= '9') {
			out = append(out, c)
		}
	}
	return out
}

// Caps: one call reports TopLogprobs labels; with a constraint configured
// it can be held to any subset of them.
func (e *Engine) Caps() engine.Caps {
	return engine.Caps{PerCall: e.topLogprobs(), Subsets: e.constrained()}
}

func (e *Engine) topLogprobs() int { return cmp.Or(max(e.TopLogprobs, 0), 20) }

func (e *Engine) constrained() bool {
	return e.Constrain == "structured_outputs" || e.Constrain == "guided_choice"
}

// DefaultMaxBody bounds an engine's reply.
const DefaultMaxBody = 32 << 20
