package fakeengine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Options configure a Fake.
type Options struct {
	Dialect Dialect
	// Models are the model ids the engine lists; nil is [DefaultModel].
	Models []string
	// Aliases are the llama.cpp aliases of the first model.
	Aliases []string
	// Behavior is how the fake answers until Set changes it.
	Behavior Behavior
	// Slots, on llama.cpp, is the total_slots GET /props reports; 0
	// answers /props with a 404, as a server without the endpoint, unless
	// Build is set.
	Slots int
	// Build names the build the fake reports it serves (SetBuild changes
	// it): llama.cpp's GET /props answers with a model file, build and
	// type and /v1/models with meta counts derived from it, Ollama's
	// /api/tags with a digest of it, the OpenAI dialect's /v1/models with
	// a root and GET /version as vLLM does. "" reports none of that, as
	// before builds were reported: /props only with Slots, digest "0", no
	// root and no /version.
	Build string
	// Parallel is the most tasks the engine runs at once, as llama-server
	// runs one per slot; the others wait in the engine for their turn, and
	// a task's Latency starts when it runs, so that a task sent past the
	// engine's capacity takes longer. 0 runs every task at once.
	Parallel int
	// PairTokens makes llama.cpp's tokenizer read two capital letters
	// standing alone ("AB") as one token, as real vocabularies hold such
	// pieces, so that a question of more options than there are
	// one-character labels (62) is asked in one prompt, labels A..Z then
	// AA, AB...; off, every byte is a token and such a question goes in
	// rounds.
	PairTokens bool
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
	CachePrompt bool // llama.cpp
	// Grammar is set when llama.cpp was sent a grammar: its generated
	// token is then the likeliest label, in the top or not, as
	// llama-server samples under one, and the reply gives its value.
	Grammar bool
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

// server is a fake's HTTP server. Close ends the requests it holds
// (done) before it stops.
type server struct {
	// URL is the server root, such as http://127.0.0.1:40123; system1's
	// node configuration takes it as is.
	URL string

	active    inflight
	srv       *httptest.Server
	done      chan struct{} // closed by Close: held handlers return
	closeOnce sync.Once
	held      *heldPort // the port refuse keeps, released by Close
}

func (s *server) listen(serve http.HandlerFunc) {
	s.done = make(chan struct{})
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.active.enter()()
		serve(w, r)
	}))
	s.URL = s.srv.URL
}

// WaitIdle waits until no request is being handled, such as a hung one
// whose client gave up; it returns ctx's error if that does not happen
// first.
func (s *server) WaitIdle(ctx context.Context) error { return s.active.wait(ctx) }

// Close stops the server, ending held requests first.
func (s *server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.Close()
		if s.held != nil {
			s.held.Close()
		}
	})
}

// refuse closes the listener and every connection, and keeps the port
// bound, not listening, until Close: connections are refused, and no
// other server takes the port. Tests run in parallel start many servers,
// and one that took a closed listener's port answered the refusing
// node's requests with its own 404s (a flake of test/faults).
func (s *server) refuse() {
	port := s.srv.Listener.Addr().(*net.TCPAddr).Port
	s.srv.Listener.Close()
	s.srv.CloseClientConnections()
	s.held, _ = holdPort(port) // where it cannot be held, it is refused as free
}

// block waits until the client gives up or the fake is closed.
func (s *server) block(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

// Fake is a running fake engine.
type Fake struct {
	server
	tasks inflight // the inference requests among active

	opt     Options
	running chan struct{} // the tasks running, when Options.Parallel bounds them

	mu      sync.Mutex
	b       Behavior
	build   string
	reqs    []Request
	refused bool
}

// New starts a fake engine. Close it when done.
func New(opt Options) *Fake {
	if opt.Models == nil {
		opt.Models = []string{DefaultModel}
	}
	f := &Fake{opt: opt, build: opt.Build}
	if opt.Parallel > 0 {
		f.running = make(chan struct{}, opt.Parallel)
	}
	f.listen(f.serve)
	f.Set(opt.Behavior)
	return f
}

// SetBuild changes the build the fake reports from the next request on:
// a model swapped under the same name. With Set, the answers change too.
func (f *Fake) SetBuild(build string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.build = build
}

// Build is the build the fake reports now.
func (f *Fake) Build() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.build
}

// Set changes how the fake answers from the next request on. Refuse
// cannot be undone: a node that came back is a new Fake.
func (f *Fake) Set(b Behavior) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b = b
	if b.Fault == Refuse && !f.refused {
		f.refused = true
		f.refuse()
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
	return slices.DeleteFunc(f.Requests(), func(r Request) bool { return !r.Inference })
}

// PeakTasks is the most tasks (inference requests, and llama.cpp's
// POST /completion) the fake has handled at once since it started,
// running or waiting for their turn (Options.Parallel): the engine calls
// a client had in flight at once.
func (f *Fake) PeakTasks() int {
	f.tasks.mu.Lock()
	defer f.tasks.mu.Unlock()
	return f.tasks.peak
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
	body, _ := io.ReadAll(r.Body)
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	infer := r.Method == http.MethodPost && r.URL.Path == f.opt.Dialect.InferencePath()
	completion := r.Method == http.MethodPost && r.URL.Path == "/completion" && f.opt.Dialect == LlamaCpp
	task := infer || completion
	// A /completion prompt list asks as many inferences, each recorded as
	// one; a lone prompt is a task that reads nothing (Prime's).
	var list []Request
	var l completionList
	if completion && json.Unmarshal(rec.Body, &l) == nil && len(l.Prompt) > 0 {
		var ok bool
		if list, ok = l.requests(rec); !ok {
			f.record(rec)
			writeError(w, f.opt.Dialect, http.StatusBadRequest, "a prompt is not the chat template's rendering")
			return
		}
	}
	if task {
		defer f.tasks.enter()()
	}
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
	b, build := f.b, f.build
	f.mu.Unlock()
	if len(rec.Labels) == 0 && infer || slices.ContainsFunc(list, func(r Request) bool { return len(r.Labels) == 0 }) {
		f.record(rec)
		writeError(w, f.opt.Dialect, http.StatusBadRequest, "cannot tell the labels from the constraint or the prompt")
		return
	}
	if list == nil {
		f.record(rec)
	}
	for _, r := range list {
		f.record(r)
	}

	if !infer && list == nil && !b.Everywhere {
		b = Behavior{}
	}
	if task && f.running != nil {
		if !f.turn(r) {
			return
		}
		defer func() { <-f.running }()
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
		writeError(w, f.opt.Dialect, b.Status, cmp.Or(b.Message, msg))
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
	case list != nil:
		reply = f.completions(list, b)
	case r.Method == http.MethodPost && r.URL.Path == "/apply-template" && f.opt.Dialect == LlamaCpp:
		var ok bool
		if reply, ok = applyTemplate(rec.Body); !ok {
			writeError(w, f.opt.Dialect, http.StatusBadRequest, "request is not JSON")
			return
		}
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		reply = []byte(`{"status":"ok"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/" && f.opt.Dialect == Ollama:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("Ollama is running"))
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models" && f.opt.Dialect != Ollama:
		reply = f.models(build)
	case r.Method == http.MethodGet && r.URL.Path == "/api/tags" && f.opt.Dialect == Ollama:
		reply = f.tags(build)
	case r.Method == http.MethodGet && r.URL.Path == "/api/version" && f.opt.Dialect == Ollama:
		reply = []byte(`{"version":"0.0.0-fake"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/version" && f.opt.Dialect == OpenAI && build != "":
		reply = []byte(`{"version":"0.0.0-fake"}`)
	case r.Method == http.MethodPost && r.URL.Path == "/tokenize" && f.opt.Dialect == LlamaCpp:
		reply = tokenize(rec.Body, f.opt.PairTokens)
	case r.Method == http.MethodGet && r.URL.Path == "/props" && f.opt.Dialect == LlamaCpp && (f.opt.Slots > 0 || build != ""):
		reply = f.props(build)
	case completion:
		reply = []byte(`{"content":" ","stop":true}`)
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
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
	case <-f.done:
	}
	return false
}

// turn waits until the task may run (Options.Parallel), reporting false
// when the client or Close ended the request first.
func (f *Fake) turn(r *http.Request) bool {
	select {
	case f.running <- struct{}{}:
		return true
	case <-r.Context().Done():
	case <-f.done:
	}
	return false
}

// stall sends the headers, promising the whole body, and half of it.
func (s *server) stall(w http.ResponseWriter, r *http.Request, reply []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(reply[:len(reply)/2])
	w.(http.Flusher).Flush()
	s.block(r)
}
