// Package fakeengine is a fake language-model engine for tests: an HTTP
// server that speaks each dialect system1 talks to (llama.cpp's
// llama-server, the OpenAI chat API, Ollama's native API), answers every
// prompt with a known distribution over the labels it was asked for,
// records what it was sent, and misbehaves on command.
//
// The fake reads the labels from the request the way an engine would have
// to: from the constraint where one is sent (llama.cpp's GBNF grammar
// root ::= "A" | "B", vLLM's structured_outputs or guided_choice), else
// from the labelled option lines ("A. billing") that follow the question
// in the prompt system1 writes. It answers with the log-
// probabilities of Behavior.Logprobs, Halving by default, and gives the
// mass left over to a token that is not a label, as an engine reporting
// values from before its constraint does (llama.cpp, Ollama, an
// unconstrained OpenAI API); under a vLLM constraint it reports values
// after it, renormalised over the labels.
//
// Faults apply to the inference endpoint only (llama.cpp and OpenAI
// POST /v1/chat/completions, Ollama POST /api/chat), unless
// Behavior.Everywhere is set; Refuse always applies to the whole server.
package fakeengine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	lp := make([]float64, len(labels))
	for i := range lp {
		lp[i] = -math.Log(float64(len(labels)))
	}
	return lp
}

// Probs returns a distribution giving the i-th label probability p[i]
// and labels beyond p none (they are left out of the top
// log-probabilities).
func Probs(p ...float64) func([]string) []float64 {
	return func(labels []string) []float64 {
		lp := make([]float64, len(labels))
		for i := range lp {
			lp[i] = math.Inf(-1)
			if i < len(p) {
				lp[i] = math.Log(p[i])
			}
		}
		return lp
	}
}

// ByLabel gives each label the probability p[label], whichever labels a
// call asks for, as one softmax over a vocabulary does; labels not in p
// are left out of the top log-probabilities.
func ByLabel(p map[string]float64) func([]string) []float64 {
	return func(labels []string) []float64 {
		lp := make([]float64, len(labels))
		for i, l := range labels {
			lp[i] = math.Inf(-1)
			if v, ok := p[l]; ok {
				lp[i] = math.Log(v)
			}
		}
		return lp
	}
}

// Options configure a Fake.
type Options struct {
	Dialect Dialect
	// Models are the model ids the engine lists; nil is [DefaultModel].
	Models []string
	// Aliases are the llama.cpp aliases of the first model.
	Aliases []string
	// NVocab is the vocabulary size llama.cpp reports; 0 is 512.
	NVocab int
	// Behavior is how the fake answers until Set changes it.
	Behavior Behavior
}

// Request is one request the fake received. The fields after Body are
// read from an inference request, the same way for every dialect.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte

	Inference bool
	Model     string
	System    string // the system message
	User      string // the last user message: the prompt
	Labels    []string
	// Temperature is nil when none was sent (Ollama: options.temperature).
	Temperature *float64
	// MaxTokens is max_tokens (Ollama: options.num_predict); 0 when none.
	MaxTokens   int
	Logprobs    bool
	TopLogprobs int
	Stream      bool
	Grammar     string // llama.cpp
	CachePrompt bool   // llama.cpp
	// Constrained is set when vLLM's structured_outputs or guided_choice
	// named the labels; the fake then answers as vLLM does, with values
	// after the constraint: over the labels alone, summing to 1.
	Constrained bool
	// Thinking is chat_template_kwargs.enable_thinking (Ollama: think);
	// nil when not sent.
	Thinking *bool
	// InputTokens is the prompt token count the fake reported (or would
	// have, under NoUsage): the words of the system and user messages.
	InputTokens int
}

// maxRecorded bounds the requests kept; older ones are dropped, so that a
// benchmark can run the fake for long.
const maxRecorded = 4096

// Fake is a running fake engine.
type Fake struct {
	// URL is the server root, such as http://127.0.0.1:40123; system1's
	// node configuration takes it as is.
	URL string

	opt  Options
	srv  *httptest.Server
	done chan struct{} // closed by Close: hung handlers return

	mu       sync.Mutex
	b        Behavior
	reqs     []Request
	refused  bool
	closed   bool
	inFlight int
	idle     chan struct{} // closed while no request is being handled
}

// New starts a fake engine. Close it when done.
func New(opt Options) *Fake {
	if opt.Models == nil {
		opt.Models = []string{DefaultModel}
	}
	if opt.NVocab == 0 {
		opt.NVocab = 512
	}
	f := &Fake{opt: opt, done: make(chan struct{}), idle: make(chan struct{})}
	close(f.idle)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	f.Set(opt.Behavior)
	return f
}

// Set changes how the fake answers from the next request on. Refuse
// cannot be undone: a node that came back is a new Fake.
func (f *Fake) Set(b Behavior) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b = b
	if b.Fault == Refuse && !f.refused {
		f.refused = true
		f.srv.Listener.Close()
		f.srv.CloseClientConnections()
	}
}

// Close stops the server, ending hung and stalled requests first.
func (f *Fake) Close() {
	f.mu.Lock()
	closed := f.closed
	f.closed = true
	f.mu.Unlock()
	if !closed {
		close(f.done)
		f.srv.Close()
	}
}

// Requests returns the requests received so far, oldest first.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// Inferences returns the inference requests received so far, oldest
// first.
func (f *Fake) Inferences() []Request {
	var out []Request
	for _, r := range f.Requests() {
		if r.Inference {
			out = append(out, r)
		}
	}
	return out
}

// WaitIdle waits until no request is being handled, such as a hung one
// whose client gave up; it returns ctx's error if that does not happen
// first.
func (f *Fake) WaitIdle(ctx context.Context) error {
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handling counts a request in, returning the function that counts it
// out.
func (f *Fake) handling() func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight == 0 {
		f.idle = make(chan struct{})
	}
	f.inFlight++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.inFlight--; f.inFlight == 0 {
			close(f.idle)
		}
	}
}

// Reset forgets the requests received so far.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = nil
}

// InferencePath is the path of the dialect's inference endpoint.
func (d Dialect) InferencePath() string {
	if d == Ollama {
		return "/api/chat"
	}
	return "/v1/chat/completions"
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	defer f.handling()()
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body)
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body.Bytes()}
	infer := r.Method == http.MethodPost && r.URL.Path == f.opt.Dialect.InferencePath()
	var chat chatRequest
	if infer {
		rec.Inference = true
		if err := json.Unmarshal(rec.Body, &chat); err != nil {
			f.record(rec)
			writeError(w, f.opt.Dialect, http.StatusBadRequest, "request is not JSON: "+err.Error())
			return
		}
		chat.fill(&rec)
	}
	f.mu.Lock()
	b := f.b
	f.mu.Unlock()
	if len(rec.Labels) == 0 && infer {
		f.record(rec)
		writeError(w, f.opt.Dialect, http.StatusBadRequest, "cannot tell the labels from the grammar or the prompt")
		return
	}
	f.record(rec)

	if !infer && !b.Everywhere {
		b = Behavior{}
	}
	if !f.wait(r, b.Latency) {
		return
	}
	switch b.Fault {
	case Hang:
		f.block(r)
		return
	case Status:
		if b.RetryAfter != "" {
			w.Header().Set("Retry-After", b.RetryAfter)
		}
		msg := http.StatusText(b.Status)
		if b.Status == http.StatusNotFound {
			msg = fmt.Sprintf("model %q not found", rec.Model)
		}
		writeError(w, f.opt.Dialect, b.Status, msg)
		return
	case NotJSON:
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>"))
		return
	}

	var reply []byte
	switch {
	case infer:
		reply = f.answer(rec, b)
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		reply = []byte(`{"status":"ok"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/" && f.opt.Dialect == Ollama:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("Ollama is running"))
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models" && f.opt.Dialect != Ollama:
		reply = f.models()
	case r.Method == http.MethodGet && r.URL.Path == "/api/tags" && f.opt.Dialect == Ollama:
		reply = f.tags()
	case r.Method == http.MethodPost && r.URL.Path == "/tokenize" && f.opt.Dialect == LlamaCpp:
		reply = tokenize(rec.Body)
	default:
		writeError(w, f.opt.Dialect, http.StatusNotFound, "File Not Found")
		return
	}
	if b.Fault == Stall {
		f.stall(w, r, reply)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(reply)
}

func (f *Fake) record(r Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == maxRecorded {
		f.reqs = slices.Delete(f.reqs, 0, maxRecorded/2)
	}
	f.reqs = append(f.reqs, r)
}

// wait sleeps for d, reporting false when the client or Close ended the
// request first.
func (f *Fake) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-f.done:
	}
	return false
}

// block waits until the client gives up or the fake is closed.
func (f *Fake) block(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

// stall sends the headers, promising the whole body, and half of it.
func (f *Fake) stall(w http.ResponseWriter, r *http.Request, reply []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(reply[:len(reply)/2])
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	f.block(r)
}

// chatRequest is an inference request in any of the three dialects.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens          *int            `json:"max_tokens"`
	Temperature        *float64        `json:"temperature"`
	Logprobs           bool            `json:"logprobs"`
	TopLogprobs        int             `json:"top_logprobs"`
	Stream             bool            `json:"stream"`
	Grammar            string          `json:"grammar"`
	CachePrompt        bool            `json:"cache_prompt"`
	ChatTemplateKwargs map[string]bool `json:"chat_template_kwargs"`
	Think              *bool           `json:"think"`
	Options            *struct {
		Temperature *float64 `json:"temperature"`
		NumPredict  *int     `json:"num_predict"`
	} `json:"options"`
	StructuredOutputs *struct {
		Choice []string `json:"choice"`
	} `json:"structured_outputs"`
	GuidedChoice []string `json:"guided_choice"`
}

var (
	grammarLabel = regexp.MustCompile(`"([^"]*)"`)
	optionLine   = regexp.MustCompile(`(?m)^([A-Za-z0-9]{1,2})\. `)
)

func (c *chatRequest) fill(r *Request) {
	r.Model = c.Model
	for _, m := range c.Messages {
		switch m.Role {
		case "system":
			r.System = m.Content
		case "user":
			r.User = m.Content
		}
	}
	r.Temperature, r.Logprobs, r.TopLogprobs, r.Stream = c.Temperature, c.Logprobs, c.TopLogprobs, c.Stream
	r.Grammar, r.CachePrompt = c.Grammar, c.CachePrompt
	if c.MaxTokens != nil {
		r.MaxTokens = *c.MaxTokens
	}
	if v, ok := c.ChatTemplateKwargs["enable_thinking"]; ok {
		r.Thinking = &v
	}
	if c.Think != nil {
		r.Thinking = c.Think
	}
	if o := c.Options; o != nil {
		if o.Temperature != nil {
			r.Temperature = o.Temperature
		}
		if o.NumPredict != nil {
			r.MaxTokens = *o.NumPredict
		}
	}
	switch {
	case strings.HasPrefix(c.Grammar, "root ::= "):
		for _, m := range grammarLabel.FindAllStringSubmatch(c.Grammar, -1) {
			r.Labels = append(r.Labels, m[1])
		}
	case c.StructuredOutputs != nil:
		r.Labels, r.Constrained = c.StructuredOutputs.Choice, true
	case c.GuidedChoice != nil:
		r.Labels, r.Constrained = c.GuidedChoice, true
	default: // the labelled option lines after the question
		i := strings.LastIndex(r.User, "Question: ")
		if i < 0 {
			break
		}
		for _, m := range optionLine.FindAllStringSubmatch(r.User[i:], -1) {
			r.Labels = append(r.Labels, m[1])
		}
	}
	r.InputTokens = len(strings.Fields(r.System)) + len(strings.Fields(r.User))
}

// TokenID is the id the fake's tokenizer gives a one-byte piece.
func TokenID(piece string) int { return 1000 + int(piece[0]) }

// filler is the token that holds the mass not on the labels.
const filler = `"`

// entry is one token with its log-probability, in the shape all three
// dialects share; ID is llama.cpp's.
type entry struct {
	ID          *int    `json:"id,omitempty"`
	Token       string  `json:"token"`
	Logprob     any     `json:"logprob"` // a float64, nil, or a literal's placeholder
	TopLogprobs []entry `json:"top_logprobs,omitempty"`
}

// MarshalJSON adds the token's bytes, as the engines do.
func (e entry) MarshalJSON() ([]byte, error) {
	type plain entry
	bs := make([]int, len(e.Token))
	for i := range len(e.Token) {
		bs[i] = int(e.Token[i])
	}
	return json.Marshal(struct {
		plain
		Bytes []int `json:"bytes"`
	}{plain(e), bs})
}

// Non-JSON literals are written as placeholders and replaced after
// marshalling, since encoding/json refuses to write them.
var literals = map[Fault]string{NaN: "NaN", PosInf: "Infinity", NegInf: "-Infinity"}

func placeholder(lit string) string { return "\x00" + lit }

// answer builds the reply to an inference request.
func (f *Fake) answer(rec Request, b Behavior) []byte {
	lps := b.logprobs(rec)
	if rec.Constrained {
		lps = renormalise(lps)
	}
	var top []entry
	rest := 1.0
	for i, l := range rec.Labels {
		if i >= len(lps) || math.IsInf(lps[i], -1) {
			continue
		}
		rest -= math.Exp(lps[i])
		top = append(top, f.entry(l, lps[i]))
	}
	if rest > 1e-12 && !rec.Constrained {
		top = append(top, f.entry(filler, math.Log(rest)))
	}
	slices.SortStableFunc(top, func(a, b entry) int { return -cmpFloat(a.Logprob.(float64), b.Logprob.(float64)) })
	if k := rec.TopLogprobs; k > 0 && len(top) > k {
		top = top[:k]
	}
	hit := func() int {
		if b.Label < 0 || b.Label >= len(rec.Labels) {
			return -1
		}
		return slices.IndexFunc(top, func(e entry) bool { return e.Token == rec.Labels[b.Label] })
	}
	if at := hit(); at >= 0 && b.Fault == MissingLabel {
		// Left out before sampling: a label outside the top is not the
		// token generated either.
		top = slices.Delete(top, at, at+1)
	}
	chosen := f.entry(filler, 0)
	for _, e := range top { // the sampled token is the likeliest label, as under a grammar
		if e.Token != filler {
			chosen = e
			break
		}
	}

	if at := hit(); at >= 0 {
		switch b.Fault {
		case NullLogprob:
			top[at].Logprob = nil
		case NaN, PosInf, NegInf:
			top[at].Logprob = placeholder(literals[b.Fault])
		case Positive:
			top[at].Logprob = 0.5
		case DuplicateLabel:
			top = slices.Insert(top, at+1, top[at])
		}
	}
	chosen.TopLogprobs = top
	content := []entry{chosen}

	var logprobs any = map[string]any{"content": content}
	switch b.Fault {
	case NoLogprobs:
		logprobs = nil
	case NullLogprobs:
		logprobs = json.RawMessage("null")
	}
	input := rec.InputTokens
	var reply any
	if f.opt.Dialect == Ollama {
		m := map[string]any{
			"model":       rec.Model,
			"created_at":  time.Now().UTC().Format(time.RFC3339Nano),
			"message":     map[string]string{"role": "assistant", "content": chosen.Token},
			"done":        true,
			"done_reason": "length",
		}
		if !b.NoUsage {
			m["prompt_eval_count"], m["eval_count"] = input, 1
		}
		switch b.Fault {
		case NoLogprobs:
		case NullLogprobs:
			m["logprobs"] = json.RawMessage("null")
		case EmptyChoices:
			m["logprobs"] = []entry{}
		default:
			m["logprobs"] = content
		}
		reply = m
	} else {
		choice := map[string]any{
			"index":         0,
			"finish_reason": "length",
			"message":       map[string]string{"role": "assistant", "content": chosen.Token},
		}
		if logprobs != nil {
			choice["logprobs"] = logprobs
		}
		m := map[string]any{
			"id":      "chatcmpl-fake",
			"object":  "chat.completion",
			"created": time.Now().Unix(),
			"model":   rec.Model,
			"choices": []any{choice},
		}
		if b.Fault == EmptyChoices {
			m["choices"] = []any{}
		}
		if !b.NoUsage {
			m["usage"] = map[string]int{"prompt_tokens": input, "completion_tokens": 1, "total_tokens": input + 1}
		}
		reply = m
	}
	out, err := json.Marshal(reply)
	if err != nil {
		panic(err) // every value above marshals
	}
	for _, lit := range literals {
		out = bytes.ReplaceAll(out, []byte(`"\u0000`+lit+`"`), []byte(lit))
	}
	return out
}

// renormalise makes log-probabilities sum to probability 1, as an engine
// reporting values after its constraint does.
func renormalise(lps []float64) []float64 {
	var sum float64
	for _, v := range lps {
		sum += math.Exp(v)
	}
	out := make([]float64, len(lps))
	for i, v := range lps {
		out[i] = v - math.Log(sum)
	}
	return out
}

func (f *Fake) entry(token string, lp float64) entry {
	e := entry{Token: token, Logprob: lp}
	if f.opt.Dialect == LlamaCpp {
		id := TokenID(token)
		e.ID = &id
	}
	return e
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// models answers GET /v1/models: llama-server's shape, with both lists,
// aliases and the vocabulary size, or OpenAI's.
func (f *Fake) models() []byte {
	var data []map[string]any
	var jev []map[string]any
	for i, id := range f.opt.Models {
		m := map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "fake"}
		if f.opt.Dialect == LlamaCpp {
			m["owned_by"] = "llamacpp"
			m["meta"] = map[string]int{"n_vocab": f.opt.NVocab}
			if i == 0 {
				m["aliases"] = f.opt.Aliases
			}
			jev = append(jev, map[string]any{"name": id, "model": id})
		}
		data = append(data, m)
	}
	body := map[string]any{"object": "list", "data": data}
	if jev != nil {
		body["models"] = jev
	}
	out, _ := json.Marshal(body)
	return out
}

// tags answers Ollama's GET /api/tags.
func (f *Fake) tags() []byte {
	var ms []map[string]any
	for _, id := range f.opt.Models {
		ms = append(ms, map[string]any{"name": id, "model": id, "size": 1, "digest": "0"})
	}
	out, _ := json.Marshal(map[string]any{"models": ms})
	return out
}

// tokenize answers llama.cpp's POST /tokenize: one token per byte, after
// a leading space token, as SentencePiece tokenizers add one.
func tokenize(body []byte) []byte {
	var req struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(body, &req)
	type token struct {
		ID    int    `json:"id"`
		Piece string `json:"piece"`
	}
	toks := []token{{TokenID(" "), " "}}
	for i := range len(req.Content) {
		p := req.Content[i : i+1]
		toks = append(toks, token{TokenID(p), p})
	}
	out, _ := json.Marshal(map[string]any{"tokens": toks})
	return out
}

// writeError writes an error body in the dialect's shape.
func writeError(w http.ResponseWriter, d Dialect, status int, msg string) {
	var body any
	if d == Ollama {
		body = map[string]string{"error": msg}
	} else {
		typ := "server_error"
		switch {
		case status == http.StatusNotFound:
			typ = "not_found_error"
		case status == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case status < 500:
			typ = "invalid_request_error"
		}
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "type": typ}}
	}
	out, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}
