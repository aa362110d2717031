package llamacpp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"system1/internal/engine"
	"system1/internal/engine/openai"
)

// Several prompts per call (Engine.PromptsPerCall). A chat call takes one
// conversation; llama-server's /completion takes a list of prompts, as
// text, in one call, and runs each as a task of its own on its slots. So
// reads that wait at the same time, of one model, top-k and grammar (a
// wide read's), go together: the chat template is applied here, learnt
// from the server's /apply-template and checked against it once per
// model. One exchange then carries several questions, which is what an
// engine that answers in a few milliseconds needs of its caller.
//
// The reads group themselves as they come (a group commit): a read that
// finds fewer calls out than the server's slots hold at PromptsPerCall a
// call posts at once; the reads that arrive while they are all out wait,
// and go together in the next. So a lone read waits for nothing, and
// under load each call carries what arrived during the others, while the
// server always has a call to run: with PromptsPerCall at half the slots,
// one call runs as the next gathers. Each read still takes its own turn
// on the node (its admission and one of the server's slots) before it
// waits, so the calls never hold more tasks than the server has slots.

// chatTemplate is a model's chat template for one system and one user
// message, thinking off, with the assistant's turn opened: the text
// around the two messages.
type chatTemplate struct{ head, middle, tail string }

// render is the text of p's two messages, in one string where the user
// turn alone was another.
func (t chatTemplate) render(p engine.Prompt) string {
	return t.head + p.System + t.middle + p.StatePart + p.Question + t.tail
}

// templateState is what is known of a model's template: learnt and
// checked (usable), being learnt (busy), rendering otherwise than the
// server (refused), or not read, to be tried again at retry.
type templateState struct {
	t                     chatTemplate
	usable, busy, refused bool
	retry                 time.Time
}

// Stand-ins for the two messages, which no template changes.
const (
	standInSystem = "\x01system1-system\x01"
	standInUser   = "\x01system1-user\x01"
)

// templateFor returns model's template when it is known to render p as
// the server would; false sends p through the chat endpoint. The first
// read of a model learns the template and checks it on its own prompt;
// reads meanwhile use the chat endpoint. A failed read is tried again a
// minute later (at once when its caller gave up on it); a template that renders otherwise than the server (one
// that rewrites the messages) is never used.
func (e *Engine) templateFor(ctx context.Context, model string, p engine.Prompt) (chatTemplate, bool) {
	e.mu.Lock()
	st := entry(&e.templates, model)
	if st.usable || st.busy || st.refused || time.Now().Before(st.retry) {
		defer e.mu.Unlock()
		return st.t, st.usable
	}
	st.busy = true
	e.mu.Unlock()

	t, err := e.learnTemplate(ctx, model, p)
	e.mu.Lock()
	defer e.mu.Unlock()
	st.busy = false
	switch {
	case err == nil:
		st.t, st.usable = t, true
	case errors.Is(err, errTemplateRewrites):
		st.refused = true
	case ctx.Err() == nil: // a read the caller gave up on is tried again at once
		st.retry = time.Now().Add(time.Minute)
	}
	return st.t, st.usable
}

var errTemplateRewrites = errors.New("the chat template does not render the messages as given")

func (e *Engine) learnTemplate(ctx context.Context, model string, p engine.Prompt) (chatTemplate, error) {
	text, err := e.applyTemplate(ctx, model, standInSystem, standInUser)
	if err != nil {
		return chatTemplate{}, err
	}
	head, rest, ok1 := strings.Cut(text, standInSystem)
	middle, tail, ok2 := strings.Cut(rest, standInUser)
	if !ok1 || !ok2 {
		return chatTemplate{}, errTemplateRewrites
	}
	t := chatTemplate{head, middle, tail}
	want, err := e.applyTemplate(ctx, model, p.System, p.User())
	if err != nil {
		return chatTemplate{}, err
	}
	if t.render(p) != want {
		return chatTemplate{}, errTemplateRewrites
	}
	return t, nil
}

// applyTemplate is the text the chat endpoint would evaluate for the two
// messages; the server runs no model for it, so it takes no slot.
func (e *Engine) applyTemplate(ctx context.Context, model, system, user string) (string, error) {
	req := openai.Chat(model, system, user)
	var reply struct {
		Prompt *string `json:"prompt"`
	}
	if err := e.query(ctx, "/apply-template", req, &reply); err != nil {
		return "", err
	}
	if reply.Prompt == nil {
		return "", fmt.Errorf("/apply-template answered no prompt")
	}
	return *reply.Prompt, nil
}

// callKey is what the prompts of one call share.
type callKey struct {
	model, grammar string
	topK           int
}

// waiter is a read waiting to go in a call. The poster sets got, then
// closes done: it never waits on a reader, and a channel of no values is
// one allocation where one of completed (which holds pointers) was two.
type waiter struct {
	ctx    context.Context
	prompt string
	got    completed
	done   chan struct{}
}

// answer hands w its part of a call.
func (w *waiter) answer(c completed) {
	w.got = c
	close(w.done)
}

// completed is one prompt's part of a call. alone sends the prompt again
// by itself: the call was refused as a whole (one prompt over the
// context makes the whole call a 400), which says nothing of this one.
type completed struct {
	c     *completion
	err   error
	alone bool
}

// callQueue holds a key's reads waiting for a call, and counts the
// posters sending that key's calls.
type callQueue struct {
	waiting []*waiter
	posters int
}

// completionFields are the names of completion's fields, which a call
// asks llama-server to answer with alone.
var completionFields = func() []string {
	t := reflect.TypeFor[completion]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = t.Field(i).Tag.Get("json")
	}
	return out
}()

// completion is one prompt's entry of /completion's reply.
type completion struct {
	Index           int                   `json:"index"`
	Model           string                `json:"model"`
	TokensEvaluated int                   `json:"tokens_evaluated"`
	TokensPredicted int                   `json:"tokens_predicted"`
	Probabilities   []openai.TokenLogprob `json:"completion_probabilities"`
}

// readTogether reads p rendered as text, in a call with the reads of the
// same key that wait with it; alone is set when it must be read by itself.
func (e *Engine) readTogether(ctx context.Context, key callKey, text string, labels []openai.Label) (r engine.Reading, floor float64, alone bool, err error) {
	t, h, err := e.turn(ctx, nil)
	if err != nil {
		return r, 0, false, err
	}
	defer h.release()
	w := &waiter{ctx: ctx, prompt: text, done: make(chan struct{})}
	e.mu.Lock()
	q := entry(&e.queues, key)
	q.waiting = append(q.waiting, w)
	post := q.posters < e.callsOut(t)
	if post {
		q.posters++
	}
	e.mu.Unlock()
	if post {
		go func() {
			for e.postNext(key, q) {
			}
		}()
	}
	var c completed
	select {
	case <-w.done:
		c = w.got
	case <-ctx.Done():
		return r, 0, false, ctx.Err()
	}
	if c.alone || c.err != nil {
		return r, 0, c.alone, c.err
	}
	tok := &c.c.Probabilities[0]
	r, err = openai.TokenReading(tok, labels, true)
	if err != nil {
		return r, 0, false, err
	}
	r.Model = c.c.Model
	r.SetCounts(c.c.TokensEvaluated, c.c.TokensPredicted)
	return r, openai.Floor(tok, firstK), false, nil
}

// Lists counts the calls of prompt lists made since the engine started,
// and the prompts they carried; ok is false unless PromptsPerCall sends
// several prompts in a call.
func (e *Engine) Lists() (calls, prompts int64, ok bool) {
	return e.listCalls.Load(), e.listPrompts.Load(), e.together()
}

// together is set when reads may go several in a call.
func (e *Engine) together() bool { return e.PromptsPerCall > 1 && !e.PinSlots }

// callsOut is how many calls of one key may be out at once: as many as
// the server's slots hold at PromptsPerCall a call, or two where it has
// not said its slots.
func (e *Engine) callsOut(t *callTokens) int {
	if t == nil {
		return 2
	}
	per := max(e.PromptsPerCall, 1)
	return max(1, (cap(t.calls)+per-1)/per)
}

// postNext posts the reads waiting under key, PromptsPerCall at most, in
// one call, and reports whether it did; when none wait, its poster ends.
func (e *Engine) postNext(key callKey, q *callQueue) (posted bool) {
	e.mu.Lock()
	// A read whose caller gave up has returned, and given its turn back:
	// sent, its prompt would be a task beyond the server's slots.
	q.waiting = slices.DeleteFunc(q.waiting, func(w *waiter) bool { return w.ctx.Err() != nil })
	n := min(len(q.waiting), max(e.PromptsPerCall, 1))
	call := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	if n == 0 {
		q.posters--
	}
	e.mu.Unlock()
	if n == 0 {
		return false
	}
	e.post(key, call)
	return true
}

// post makes one call of the waiters' prompts and hands each its part.
// The call ends when it is done or every waiter has given up.
func (e *Engine) post(key callKey, call []*waiter) {
	ctx, cancel := engine.Bound(context.WithoutCancel(call[0].ctx))
	defer cancel()
	left := atomic.Int64{}
	left.Store(int64(len(call)))
	gaveUp := func() { // one for the call, not one a waiter
		if left.Add(-1) == 0 {
			cancel()
		}
	}
	stops := make([]func() bool, len(call))
	defer func() { // one deferred call, not one a waiter
		for _, stop := range stops {
			stop()
		}
	}()
	for i, w := range call {
		stops[i] = context.AfterFunc(w.ctx, gaveUp)
	}
	prompts := make([]string, len(call))
	for i, w := range call {
		prompts[i] = w.prompt
	}
	e.listCalls.Add(1)
	e.listPrompts.Add(int64(len(call)))
	req := struct {
		Model       string   `json:"model"`
		Prompt      []string `json:"prompt"`
		NPredict    int      `json:"n_predict"`
		Temperature float64  `json:"temperature"`
		NProbs      int      `json:"n_probs"`
		Grammar     string   `json:"grammar,omitempty"`
		CachePrompt bool     `json:"cache_prompt"`
		// Only what is read: an entry otherwise echoes its prompt and
		// the call's settings, some 2 KB more a prompt to decode.
		ResponseFields []string `json:"response_fields"`
	}{key.model, prompts, 1, 0, key.topK, key.grammar, true, completionFields}
	raw, err := openai.PostBody(ctx, e.HTTP, e.url("/completion"), e.Key, req)
	if f := (*engine.Failure)(nil); errors.As(err, &f) && f.Kind == engine.Rejected {
		for _, w := range call {
			w.answer(completed{alone: true})
		}
		return
	}
	var parts []*completion
	if err == nil {
		parts, err = byIndex(raw, len(call))
	}
	for i, w := range call {
		if err != nil {
			w.answer(completed{err: err})
		} else {
			w.answer(completed{c: parts[i]})
		}
	}
}

// byIndex orders a reply's entries by their prompt, each present once
// with a first token. The reply is a list, or for one prompt its entry.
func byIndex(raw []byte, n int) ([]*completion, error) {
	var reply []completion
	var err error
	if bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("{")) {
		reply = make([]completion, 1)
		err = openai.Unmarshal(raw, &reply[0])
	} else {
		err = openai.Unmarshal(raw, &reply)
	}
	if err != nil {
		return nil, &engine.Failure{Kind: engine.Malformed, Err: fmt.Errorf("/completion answered no list of entries: %v", err)}
	}
	if len(reply) != n {
		return nil, &engine.Failure{Kind: engine.Malformed, Err: fmt.Errorf("/completion answered %d entries for %d prompts", len(reply), n)}
	}
	out := make([]*completion, n)
	for i := range reply {
		c := &reply[i]
		if c.Index < 0 || c.Index >= n || out[c.Index] != nil {
			return nil, &engine.Failure{Kind: engine.Malformed, Err: fmt.Errorf("/completion answered entry index %d for %d prompts", c.Index, n)}
		}
		if len(c.Probabilities) == 0 {
			return nil, &engine.Failure{Kind: engine.Malformed, Err: fmt.Errorf("/completion answered no log-probabilities for prompt %d", c.Index)}
		}
		out[c.Index] = c
	}
	return out, nil
}
