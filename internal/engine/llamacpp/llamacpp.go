// Package llamacpp speaks to llama.cpp's llama-server: its chat endpoint
// with the prompt cache and full-vocabulary log-probabilities, and its
// tokenizer to prove that each label is one token and to match it by id.
//
// A read of the top firstK sends no grammar. llama-server reports
// log-probabilities from before any grammar, so there one changes nothing
// read, and costs the server a pass over the whole vocabulary whenever the
// likeliest token is no label: on the one thread every slot shares, most
// of a call on a GPU (docs/benchmarks.md). A wide read (maxK) carries a
// grammar over the labels: its generated token is then a label, whose own
// value llama-server reports even below the top maxK, so a model whose
// labels are all out of its top still gives the likeliest of them.
package llamacpp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/engine"
	"system1/internal/engine/openai"
	"system1/internal/fingerprint"
)

// Engine is one llama-server.
type Engine struct {
	BaseURL string
	Key     string
	HTTP    *http.Client
	// PerCall caps the labels one call reads; 0, the default, reads any
	// number, since the server reports the whole vocabulary on request.
	PerCall int
	// PinSlots sends every prompt over one state to the same server slot
	// (the state's hash modulo the slots), so that the state is prefilled
	// once and later questions only add their own tokens: llama-server
	// keeps its prompt cache per slot and does not share it across slots.
	PinSlots bool
	// SpreadSlots, with PinSlots, gives the i-th question over a state
	// (engine.Spread) the slot i after the state's, so that a request's
	// questions are evaluated in one batch instead of one after another.
	// The state reaches those slots through llama-server's host-memory
	// prompt cache (--cache-ram, default 8192 MiB, with --cache-idle-slots,
	// on by default): every task that starts copies the idle slots into
	// it, and a slot given a prompt it does not hold loads the longest
	// cached prefix. A loaded copy leaves the cache, so the state's slot
	// must stay idle while the others load: Prime before the others go.
	// Prime also leaves each of those slots holding a prompt, without
	// which llama-server loads nothing into it.
	SpreadSlots bool
	// Pool is set when BaseURL is several llama-servers behind a router
	// (config.Node.Pool): the slots one of them reports bound nothing
	// (the node's max_inflight bounds the pool), and no task is pinned
	// to a slot (PinSlots is off).
	Pool bool
	// PromptsPerCall, above 1, lets reads that wait at the same time go
	// together, up to this many in one call (see together.go). It applies
	// with PinSlots off: the server gives a call's prompts its slots.
	PromptsPerCall int

	mu    sync.Mutex
	ids   map[tokenKey]int // label -> token id, or -1 when not one token, per model
	stats map[string]*readStats

	nVocab, nSlots fact
	// identities are the last identity read of each model (Identity).
	identities map[string]fingerprint.Identity

	// calls bound the tasks in flight, once the slots are known (guarded
	// by mu): a task beyond the slots would only wait in llama-server,
	// holding one of its few HTTP threads (its slots plus four), and once
	// they are all held a new connection waits for a kept-alive one to
	// time out (5 s).
	calls *callTokens

	// held are the slots Hold gave a state, and released is closed and
	// replaced when one is given back (guarded by mu).
	held     map[int]bool
	released chan struct{}

	// templates are the chat templates learnt, and queues the reads
	// waiting for a call, per model (guarded by mu).
	templates map[string]*templateState
	queues    map[callKey]*callQueue
	// listCalls and listPrompts count the calls of prompt lists and the
	// prompts they carried (Lists).
	listCalls, listPrompts atomic.Int64
}

var _ engine.Engine = (*Engine)(nil)

// Caps: any number of labels per call unless capped, and any subset of
// them: the values are the whole vocabulary's, read at the labels asked.
func (e *Engine) Caps() engine.Caps { return engine.Caps{PerCall: e.PerCall, Subsets: true} }

type tokenKey struct{ model, label string }

// A read asks for the top firstK alternatives, which hold the labels of a
// model that answers with them. When labels are missing and could matter
// (see worthAgain), it asks again for the top maxK; the prompt is cached by
// then, and llama-server sorts the whole vocabulary for any number, so the
// second call costs a decode step and a larger reply. A label below the
// 1024th token holds no probability a decision turns on, and is reported as
// missing. A model whose labels are often missing (more than one read in
// five needs a second call) is asked for maxK from the start. Such a read
// is counted as the read of the top firstK it holds would have been, so a
// model stays asked for maxK while its labels stay out of its top firstK,
// instead of paying a second call every few reads to find out.
const (
	firstK = 64
	maxK   = 1024
)

// negligible is the share of the labels' mass below which missing labels
// are not worth a second call: each is below the smallest reported value,
// so together they hold at most missing*exp(floor).
const negligible = 0.01

// readStats counts a model's reads and how many needed a second call, over
// a window that halves as it fills.
type readStats struct{ reads, again int }

// Read asks for one token and reads the labels' log-probabilities: the raw
// softmax over the vocabulary, renormalised over the labels' token ids, so
// the mass outside the labels is a real signal.
func (e *Engine) Read(ctx context.Context, model string, p engine.Prompt) (engine.Reading, error) {
	asked := p.Asked()
	labels := make([]openai.Label, len(asked))
	for i, l := range asked {
		id, err := e.labelID(ctx, model, l)
		if err != nil {
			return engine.Reading{}, err
		}
		labels[i] = openai.Label{Text: l, ID: id}
	}
	e.mu.Lock()
	st := e.stats[model]
	wide := st != nil && st.again*5 > st.reads
	e.mu.Unlock()

	vocab := e.vocab(ctx)
	k := min(vocab, firstK)
	if wide {
		k = min(vocab, maxK)
	}
	r, floor, err := e.read(ctx, model, p, labels, k)
	needs := err == nil && worthAgain(r, floor)
	e.count(model, needs)
	if !needs || k >= min(vocab, maxK) {
		return r, err
	}
	r, _, err = e.read(ctx, model, p, labels, min(vocab, maxK))
	return r, err
}

func (e *Engine) count(model string, again bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := entry(&e.stats, model)
	if st.reads++; again {
		st.again++
	}
	if st.reads >= 100 {
		st.reads, st.again = st.reads/2, st.again/2
	}
}

// worthAgain reports whether the labels missing from a read of the top
// firstK, whose lowest value is floor, could hold more than a negligible
// share of the labels' mass. A label found below floor is one such a read
// would have missed.
func worthAgain(r engine.Reading, floor float64) bool {
	var found float64
	missing := 0
	for i, ok := range r.Found {
		if ok && r.Logprobs[i] >= floor {
			found += math.Exp(r.Logprobs[i])
		} else {
			missing++
		}
	}
	return missing > 0 && float64(missing)*math.Exp(floor) > negligible*found
}

// read makes one call for the top topK alternatives, under a grammar over
// the labels when topK is wider than firstK, and returns its reading and
// the firstK-th highest value reported (see worthAgain).
func (e *Engine) read(ctx context.Context, model string, p engine.Prompt, labels []openai.Label, topK int) (engine.Reading, float64, error) {
	grammar := ""
	if topK > firstK {
		grammar = Grammar(p.Asked())
	}
	if e.together() {
		if t, ok := e.templateFor(ctx, model, p); ok {
			r, floor, alone, err := e.readTogether(ctx, callKey{model, grammar, topK}, t.render(p), labels)
			if !alone {
				return r, floor, err
			}
		}
	}
	req := openai.Chat(model, p.System, p.User())
	req.MaxTokens, req.Logprobs, req.TopLogprobs, req.Grammar, req.CachePrompt = 1, true, topK, grammar, true
	if e.PinSlots {
		if n := e.Slots(ctx); n > 0 {
			slot := int(p.Prefix() % uint64(n))
			if h, ok := ctx.Value(heldKey{}).(int); ok && h < n {
				slot = h
			} else if e.SpreadSlots {
				slot = (slot + engine.Spread(ctx)) % n
			}
			req.IDSlot = &slot
		}
	}
	var reply openai.ChatResponse
	if err := e.infer(ctx, "/v1/chat/completions", req.IDSlot, req, &reply); err != nil {
		return engine.Reading{}, 0, err
	}
	r, err := openai.Reading(&reply, labels, true)
	if err != nil {
		return r, 0, err
	}
	tok, _ := reply.FirstToken() // Reading checked it
	return r, openai.Floor(tok, firstK), nil
}

// Prime readies the slots a request's other questions over state go to
// (SpreadSlots): a task of a single token pinned to each of the k-1 slots
// after the state's, sent together so that they cost about one decode
// step. Each task that starts makes llama-server copy its idle slots, the
// state's among them, into its host-memory prompt cache; and each leaves
// its slot holding a prompt, which matters because llama-server loads a
// cached prefix only into a slot that holds one: a slot unused since the
// server started would prefill the state again (it computes what it would
// keep of the slot as 0/0, which is no reason to load). Unpinned, or when
// the server does not say how many slots it has, one task on any free
// slot does the copying.
func (e *Engine) Prime(ctx context.Context, state json.RawMessage, k int) error {
	n := 0
	if e.PinSlots && e.SpreadSlots {
		n = e.Slots(ctx)
	}
	if n <= 1 {
		return e.prime(ctx, nil)
	}
	home := int(engine.StatePrefix(state) % uint64(n))
	errs := make([]error, max(min(k, n)-1, 0))
	var wg sync.WaitGroup
	for i := range errs {
		slot := (home + 1 + i) % n
		wg.Go(func() { errs[i] = e.prime(ctx, &slot) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// heldKey carries, in a context, the slot Hold gave its state.
type heldKey struct{}

// Hold gives state a server slot of its own, for row-wise work
// (engine.WithThroughput): the calls made under the returned context go
// to that slot, one after another, so that the state is prefilled once
// and each question adds only its own tokens, while other states keep the
// other slots busy. The slot is the state's home, where a request over it
// alone would go (the state's hash modulo the slots), when no other state
// holds it, else the next one free; when every slot is held, Hold waits
// for one, or ctx's end. release gives the slot back. Unpinned, or when
// the server does not say how many slots it has, it holds nothing.
func (e *Engine) Hold(ctx context.Context, state json.RawMessage) (held context.Context, release func(), err error) {
	n := 0
	if e.PinSlots {
		n = e.Slots(ctx)
	}
	if n <= 0 {
		return ctx, func() {}, nil
	}
	home := int(engine.StatePrefix(state) % uint64(n))
	for {
		e.mu.Lock()
		if e.held == nil {
			e.held, e.released = map[int]bool{}, make(chan struct{})
		}
		for i := range n {
			slot := (home + i) % n
			if e.held[slot] {
				continue
			}
			e.held[slot] = true
			e.mu.Unlock()
			return context.WithValue(ctx, heldKey{}, slot), sync.OnceFunc(func() { e.unhold(slot) }), nil
		}
		wait := e.released
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx, nil, ctx.Err()
		}
	}
}

// unhold gives slot back and wakes those waiting for one.
func (e *Engine) unhold(slot int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.held, slot)
	close(e.released)
	e.released = make(chan struct{})
}

// HeldSlots is how many slots Hold has given states now.
func (e *Engine) HeldSlots() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.held)
}

// prime runs one task of a single token, on slot when it is not nil.
func (e *Engine) prime(ctx context.Context, slot *int) error {
	req := struct {
		Prompt   string `json:"prompt"`
		NPredict int    `json:"n_predict"`
		IDSlot   *int   `json:"id_slot,omitempty"`
	}{Prompt: " ", NPredict: 1, IDSlot: slot}
	var reply struct{}
	return e.infer(ctx, "/completion", slot, req, &reply)
}

// infer posts a task, on slot when it is not nil, as one engine call: it
// first takes one of the node's slots (engine.Admit), then waits for its
// server slot, with at most one task per server slot at a time: the
// others wait here, where the caller's deadline holds, rather than in
// llama-server, where each holds one of its few HTTP threads, and where a
// task pinned to a busy slot is deferred and now and then left waiting
// until the next task arrives. The node's slot comes first so that a
// request holds no more server slots, and waits behind no more of its own
// tasks, than its share of the node's; the node's timeout (engine.Bound)
// starts once the task has its server slot, so that it bounds the task,
// not its turn.
func (e *Engine) infer(ctx context.Context, path string, slot *int, req, reply any) error {
	_, h, err := e.turn(ctx, slot)
	if err != nil {
		return err
	}
	defer h.release()
	return e.query(ctx, path, req, reply)
}

// turn takes what a task waits for before it runs, in infer's order: the
// node's admission, then its server slot when slot is not nil, then one
// of the server's calls; h.release gives them back. t is the server's
// callTokens, nil while it has not said its slots.
func (e *Engine) turn(ctx context.Context, slot *int) (t *callTokens, h held, err error) {
	t = e.tokens(ctx)
	if h.done, err = engine.Admit(ctx); err != nil {
		return nil, held{}, err
	}
	if t == nil {
		return nil, h, nil
	}
	if slot != nil && *slot < len(t.slots) {
		if err := acquire(ctx, t.slots[*slot]); err != nil {
			h.release()
			return nil, held{}, err
		}
		h.chans[h.n], h.n = t.slots[*slot], h.n+1
	}
	if err := acquire(ctx, t.calls); err != nil {
		h.release()
		return nil, held{}, err
	}
	h.chans[h.n], h.n = t.calls, h.n+1
	return t, h, nil
}

// held is what a turn took: the admission, then the tokens taken after
// it, in order. A value, not a closure over them, which cost every read
// two allocations.
type held struct {
	done  func()
	chans [2]chan struct{}
	n     int
}

// release gives a turn's tokens back, the last taken first, then its
// admission.
func (h *held) release() {
	for i := h.n - 1; i >= 0; i-- {
		<-h.chans[i]
	}
	h.done()
}

// entry is *m's value for k, made, with *m, on first use: the engine's
// maps by model are made as models are asked. The caller holds e.mu.
func entry[K comparable, V any](m *map[K]*V, k K) *V {
	if *m == nil {
		*m = map[K]*V{}
	}
	v := (*m)[k]
	if v == nil {
		v = new(V)
		(*m)[k] = v
	}
	return v
}

func acquire(ctx context.Context, c chan struct{}) error {
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// callTokens bound the tasks in flight to one server: one token per slot
// in calls, and one each in slots for the tasks pinned to it.
type callTokens struct {
	calls chan struct{}
	slots []chan struct{}
}

// tokens are the server's callTokens, made once it has said how many
// slots it has; nil while it has not (its /props is read again a minute
// later), and for a pool, whose servers' slots are not one server's.
func (e *Engine) tokens(ctx context.Context) *callTokens {
	if e.Pool {
		return nil
	}
	e.mu.Lock()
	t := e.calls
	e.mu.Unlock()
	if t != nil && !e.nSlots.stale.Load() {
		return t
	}
	n := e.Slots(ctx)
	if n <= 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.calls == nil || len(e.calls.slots) != n { // none yet, or the server came back with other slots
		e.calls = &callTokens{calls: make(chan struct{}, n), slots: make([]chan struct{}, n)}
		for i := range e.calls.slots {
			e.calls.slots[i] = make(chan struct{}, 1)
		}
	}
	return e.calls
}

// Grammar is a GBNF grammar whose language is exactly the labels.
func Grammar(labels []string) string {
	b := make([]byte, 0, 10+6*len(labels))
	b = append(b, "root ::= "...)
	for i, l := range labels {
		if i > 0 {
			b = append(b, " | "...)
		}
		b = strconv.AppendQuote(b, l) // labels are plain ASCII: Go quoting is GBNF quoting
	}
	return string(b)
}

// Models lists the model id and aliases the server answers to.
func (e *Engine) Models(ctx context.Context) ([]string, error) {
	return openai.ListModels(ctx, e.HTTP, e.url("/v1/models"), e.Key)
}

// vocab is the model's vocabulary size, from /v1/models; maxK when the
// server does not say.
func (e *Engine) vocab(ctx context.Context) int {
	n := e.nVocab.get(ctx, func(ctx context.Context) (int, error) {
		var list struct {
			Data []struct {
				Meta struct {
					NVocab int `json:"n_vocab"`
				} `json:"meta"`
			} `json:"data"`
		}
		if err := e.get(ctx, "/v1/models", &list); err != nil || len(list.Data) == 0 {
			return 0, err
		}
		return list.Data[0].Meta.NVocab, nil
	})
	return cmp.Or(n, maxK)
}

// Down says the server was found down: what comes back may run another
// number of slots (-np), so they are read again on the next call, the
// count read before standing until then and while the read fails.
func (e *Engine) Down() { e.nSlots.stale.Store(true) }

// KnownSlots is Slots as last read, without a call: 0 before the first
// read, or when the server did not say.
func (e *Engine) KnownSlots() int { return e.nSlots.peek() }

// Slots is how many tasks the server runs at once: its slots (-np), from
// /props; 0 when it does not say, or says more than maxSlots.
func (e *Engine) Slots(ctx context.Context) int {
	return e.nSlots.get(ctx, func(ctx context.Context) (int, error) {
		var props struct {
			TotalSlots int `json:"total_slots"`
		}
		err := e.get(ctx, "/props", &props)
		if err == nil && props.TotalSlots > maxSlots {
			return 0, fmt.Errorf("/props says %d slots, more than the %d any server runs", props.TotalSlots, maxSlots)
		}
		return props.TotalSlots, err
	})
}

// maxSlots is the most slots a server's /props is believed to have: each
// slot holds its own share of the context, so no llama-server runs more.
// A larger count (a proxy's, a broken build's) is not a count: the engine
// bounds and pins its calls by every slot, one each.
const maxSlots = 1 << 16

// get reads one of the server's facts (openai.Get).
func (e *Engine) get(ctx context.Context, path string, reply any) error {
	return openai.Get(ctx, e.HTTP, e.url(path), e.Key, openai.DefaultMaxBody, reply)
}

// fact is a number read once from the server, such as its vocabulary
// size. A failed read is tried again only after a minute, so that a server
// without the endpoint costs no extra call per request.
type fact struct {
	// turn is held through a read: one caller reads, the others wait
	// for it, each no longer than its own context allows.
	turn  chan struct{}
	once  sync.Once
	value atomic.Int64 // 0 until read
	retry time.Time
	// stale is set when the value is to be read again (Down); it stands
	// until a read succeeds.
	stale atomic.Bool
}

// lock takes f's turn, or gives up with ctx, reporting whether it took it.
func (f *fact) lock(ctx context.Context) bool {
	f.once.Do(func() { f.turn = make(chan struct{}, 1) })
	select {
	case f.turn <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *fact) unlock() { <-f.turn }

// reset forgets the value, for a server that now serves another model.
func (f *fact) reset() {
	f.lock(context.Background())
	defer f.unlock()
	f.value.Store(0)
	f.stale.Store(false)
	f.retry = time.Time{}
}

// peek is the value read, 0 when none was; it never waits for a read.
func (f *fact) peek() int { return int(f.value.Load()) }

// get is the value, read on first use; 0 while the server does not say.
// A read the caller gave up on (ctx's end) says nothing of the server:
// the next caller reads it at once.
func (f *fact) get(ctx context.Context, read func(context.Context) (int, error)) int {
	if !f.lock(ctx) {
		return f.peek()
	}
	defer f.unlock()
	last := f.peek()
	if last > 0 && !f.stale.Load() || time.Now().Before(f.retry) {
		return last
	}
	v, err := read(ctx)
	if err != nil || v <= 0 {
		if last > 0 { // stale: read again on the next call
			return last
		}
		if ctx.Err() == nil {
			f.retry = time.Now().Add(time.Minute)
		}
		return 0
	}
	f.value.Store(int64(v))
	f.stale.Store(false)
	return v
}

// Labels keeps the first want candidates that are one token of the model's
// own vocabulary, asking the server's tokenizer once per candidate and
// caching the answer, with the token id that replies are matched on.
func (e *Engine) Labels(ctx context.Context, model string, candidates []string, want int) ([]string, error) {
	for {
		labels, unknown := e.known(model, candidates, want)
		if unknown < 0 {
			return labels, nil
		}
		c := candidates[unknown]
		id, err := e.tokenID(ctx, c)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		if e.ids == nil {
			e.ids = map[tokenKey]int{}
		}
		e.ids[tokenKey{model, c}] = id
		e.mu.Unlock()
	}
}

// labelID is label's token id for model. One not known (an identity
// read found the server swapped its model after the question's labels
// were checked, and forgot its ids) is asked of the tokenizer again at
// once, as Labels does.
func (e *Engine) labelID(ctx context.Context, model, label string) (int, error) {
	e.mu.Lock()
	id, ok := e.ids[tokenKey{model, label}]
	e.mu.Unlock()
	if !ok {
		if _, err := e.Labels(ctx, model, []string{label}, 1); err != nil {
			return 0, err
		}
		e.mu.Lock()
		id, ok = e.ids[tokenKey{model, label}]
		e.mu.Unlock()
	}
	if !ok || id < 0 {
		return 0, fmt.Errorf("label %q is not one token of model %s", label, model)
	}
	return id, nil
}

// tokenID finds the token whose text is exactly label, -1 when no single
// token is. A tokenizer may put a space before the text it is given
// (SentencePiece does), so a label standing alone can come back as a
// whitespace token and the label's token; after a newline it cannot merge
// with what precedes it.
func (e *Engine) tokenID(ctx context.Context, label string) (int, error) {
	for _, text := range []string{label, "\n" + label} {
		var reply struct {
			Tokens []struct {
				ID    int    `json:"id"`
				Piece string `json:"piece"`
			} `json:"tokens"`
		}
		req := map[string]any{"content": text, "add_special": false, "with_pieces": true}
		// The tokenizer runs no model: no slot, so that a new model's
		// hundreds of candidates do not each wait for one.
		if err := e.query(ctx, "/tokenize", req, &reply); err != nil {
			return 0, fmt.Errorf("tokenizing %q: %w", label, err)
		}
		var rest []int
		for i, t := range reply.Tokens {
			if strings.TrimSpace(t.Piece) != "" {
				rest = append(rest, i)
			}
		}
		if len(rest) == 1 && reply.Tokens[rest[0]].Piece == label {
			return reply.Tokens[rest[0]].ID, nil
		}
	}
	return -1, nil
}

// query posts a request bounded by the node's timeout (engine.Bound),
// taking no slot: one that runs no model, or infer's once it has its turn.
func (e *Engine) query(ctx context.Context, path string, req, reply any) error {
	ctx, cancel := engine.Bound(ctx)
	defer cancel()
	return openai.Post(ctx, e.HTTP, e.url(path), e.Key, req, reply)
}

func (e *Engine) url(path string) string { return strings.TrimRight(e.BaseURL, "/") + path }
