package faults_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/systemone"
)

// A target is where a row's fault is put: an engine node of one of
// fakeengine's dialects, or a System One endpoint (an upstream node of
// the fleet, a systemone provider of the gateway).
type target string

const (
	llamacpp  = target(fakeengine.LlamaCpp)
	openai    = target(fakeengine.OpenAI)
	ollama    = target(fakeengine.Ollama)
	systemOne = target("systemone")
	// systemOneNode is a System One endpoint configured as a fleet node
	// (dialect: systemone) behind an engine provider; systemOne, on the
	// gateway's rows, is the same endpoint as a systemone provider.
	systemOneNode = target("systemone-node")
)

var (
	engines    = []target{llamacpp, openai, ollama}
	everywhere = []target{llamacpp, openai, ollama, systemOne}
)

// Faults only a System One endpoint has, besides fakeengine's.
const (
	// OutsideOptions answers a choice with a key that is not one of the
	// options ("refunds"), the rest of the reply well-formed.
	OutsideOptions fakeengine.Fault = "outside-options"
	// Late holds the request, whatever the client does, until Release;
	// then it answers correctly, into a connection nobody reads.
	Late fakeengine.Fault = "late"
)

// upstream is a fake System One endpoint. It answers POST /v1/systemone
// with the Halving distribution over each question's options, unrounded
// (4/7, 2/7, 1/7 for three options; a noul 2/3), so that system1 reports
// exactly what it reports over a fake engine; or it misbehaves as its
// fakeengine.Behavior says. Faults mean what they mean on an engine where
// they can (Refuse, Hang, Status with RetryAfter, NotJSON, Stall), and
// elsewhere the System One reply's nearest fault:
//
//	NoLogprobs     the reply has no "answers"
//	NullLogprobs   "answers": null
//	EmptyChoices   "answers": {}
//	NaN, ±Inf      the option at Label has the literal probability NaN, Infinity, -Infinity
//	NullLogprob    the option at Label has probability null, and the noul is null
//	Positive       the option at Label has probability 1.5
//	MissingLabel   the option at Label is left out of the probabilities
//	OutsideOptions the choice is "refunds"
//	Late           see Late
type upstream struct {
	URL string

	srv     *httptest.Server
	b       fakeengine.Behavior
	done    chan struct{} // closed by Close: held handlers return
	release chan struct{} // closed by Release: Late handlers answer
	arrived chan struct{} // one token per POST /v1/systemone, for a test to wait on

	mu       sync.Mutex
	calls    int
	inFlight int
	idle     chan struct{} // closed while no request is being handled
	closed   bool
	released bool
}

func newUpstream(b fakeengine.Behavior) *upstream {
	u := &upstream{b: b, done: make(chan struct{}), release: make(chan struct{}), arrived: make(chan struct{}, 64), idle: make(chan struct{})}
	close(u.idle)
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	u.URL = u.srv.URL
	if b.Fault == fakeengine.Refuse {
		u.srv.Listener.Close()
	}
	return u
}

// Calls counts the POST /v1/systemone requests received.
func (u *upstream) Calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

// Release lets Late requests answer.
func (u *upstream) Release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.released {
		u.released = true
		close(u.release)
	}
}

// Close stops the server, ending held requests first.
func (u *upstream) Close() {
	u.mu.Lock()
	closed := u.closed
	u.closed = true
	u.mu.Unlock()
	if !closed {
		close(u.done)
		u.srv.Close()
	}
}

// WaitIdle waits until no request is being handled.
func (u *upstream) WaitIdle(ctx context.Context) error {
	u.mu.Lock()
	idle := u.idle
	u.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (u *upstream) handling() func() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.inFlight == 0 {
		u.idle = make(chan struct{})
	}
	u.inFlight++
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.inFlight--; u.inFlight == 0 {
			close(u.idle)
		}
	}
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	defer u.handling()()
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodGet && (r.URL.Path == "/health" || r.URL.Path == "/v1/models"):
		writeBody(w, http.StatusOK, `{"status":"ok","models":[{"name":"fake","description":"a fake","release_date":"2026-01-01"}]}`)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/systemone":
		writeBody(w, http.StatusNotFound, `{"detail":"Not Found"}`)
		return
	}
	u.mu.Lock()
	u.calls++
	u.mu.Unlock()
	select {
	case u.arrived <- struct{}{}:
	default:
	}
	p := systemone.ParseRequest(body)
	if len(p.Problems) > 0 {
		writeBody(w, http.StatusUnprocessableEntity, `{"detail":"the fake could not read the request"}`)
		return
	}
	switch u.b.Fault {
	case fakeengine.Hang:
		u.block(r)
		return
	case Late:
		select { // the client is not watched: the answer comes late, whatever happened
		case <-u.release:
		case <-u.done:
			return
		}
	case fakeengine.Status:
		if u.b.RetryAfter != "" {
			w.Header().Set("Retry-After", u.b.RetryAfter)
		}
		msg := http.StatusText(u.b.Status)
		if u.b.Status == http.StatusNotFound {
			msg = fmt.Sprintf("model %q not found", p.Model)
		}
		writeBody(w, u.b.Status, fmt.Sprintf(`{"detail":%q}`, msg))
		return
	case fakeengine.NotJSON:
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		return
	}
	reply := u.answer(p.Request)
	if u.b.Fault == fakeengine.Stall {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, reply[:len(reply)/2])
		w.(http.Flusher).Flush()
		u.block(r)
		return
	}
	writeBody(w, http.StatusOK, reply)
}

func (u *upstream) block(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-u.done:
	}
}

// halving is fakeengine.Halving renormalised over n options, as system1
// reports it: 2^(n-1-i) / (2^n - 1).
func halving(n int) decision.Distribution {
	d := make(decision.Distribution, n)
	total := math.Exp2(float64(n)) - 1
	for i := range d {
		d[i] = math.Exp2(float64(n-1-i)) / total
	}
	return d
}

// answer writes the reply to req, with the fault's damage.
func (u *upstream) answer(req decision.Request) string {
	f, hit := u.b.Fault, u.b.Label
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var answers []string
	for _, q := range req.Questions {
		d := halving(len(q.Options))
		var a string
		switch q.Kind {
		case decision.Noul:
			v := num(d[0])
			if f == fakeengine.NullLogprob {
				v = "null"
			}
			a = fmt.Sprintf(`{"type":"noul","noul":%s}`, v)
		case decision.Choice:
			var ps []string
			for i, o := range q.Options {
				v := num(d[i])
				if i == hit {
					switch f {
					case fakeengine.NaN:
						v = "NaN"
					case fakeengine.PosInf:
						v = "Infinity"
					case fakeengine.NegInf:
						v = "-Infinity"
					case fakeengine.NullLogprob:
						v = "null"
					case fakeengine.Positive:
						v = "1.5"
					case fakeengine.MissingLabel:
						continue
					}
				}
				ps = append(ps, fmt.Sprintf("%q:%s", o.Key, v))
			}
			choice := q.Options[d.Argmax()].Key
			if f == OutsideOptions {
				choice = "refunds"
			}
			a = fmt.Sprintf(`{"type":"choice","choice":%q,"confidence":%s,"probabilities":{%s}}`,
				choice, num(decision.ChoiceConfidence(d)), strings.Join(ps, ","))
		default:
			panic("the fault matrix asks only choices and nouls")
		}
		answers = append(answers, fmt.Sprintf("%q:%s", q.ID, a))
	}
	all := "{" + strings.Join(answers, ",") + "}"
	switch f {
	case fakeengine.NoLogprobs:
		return fmt.Sprintf(`{"model":%q,"usage":{"input_tokens":10,"output_tokens":1}}`, req.Model)
	case fakeengine.NullLogprobs:
		all = "null"
	case fakeengine.EmptyChoices:
		all = "{}"
	}
	return fmt.Sprintf(`{"model":%q,"answers":%s,"usage":{"input_tokens":10,"output_tokens":1}}`, req.Model, all)
}

func writeBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// A node is one fake, an engine or a System One endpoint, and system1's
// configuration of it.
type node struct {
	target target
	engine *fakeengine.Fake
	up     *upstream
	cfg    config.Node
}

// fakeModel is the model every node claims in its configuration.
const fakeModel = fakeengine.DefaultModel

// startNode starts a fake of the target's kind behaving as b, configured
// as claiming models (fakeModel when none), with the given timeout.
func startNode(t testing.TB, name string, tg target, b fakeengine.Behavior, timeout time.Duration, models ...string) *node {
	t.Helper()
	if len(models) == 0 {
		models = []string{fakeModel}
	}
	n := &node{target: tg}
	var url string
	dialect := string(tg)
	if tg == systemOne || tg == systemOneNode {
		dialect = "systemone"
		n.up = newUpstream(b)
		t.Cleanup(n.up.Close)
		url = n.up.URL
	} else {
		if b.Fault == Late { // an engine's late answer: its latency, past the node's timeout
			b = fakeengine.Behavior{Latency: time.Minute}
		}
		n.engine = fakeengine.New(fakeengine.Options{Dialect: fakeengine.Dialect(tg), Behavior: b})
		t.Cleanup(n.engine.Close)
		url = n.engine.URL
	}
	n.cfg = config.Node{Name: name, URL: url, Dialect: dialect, Models: models, Timeout: config.Duration(timeout)}
	return n
}

// calls counts the inference requests the node got: engine chat calls,
// or System One requests.
func (n *node) calls() int {
	if n.up != nil {
		return n.up.Calls()
	}
	return len(n.engine.Inferences())
}

// arrived waits until the node has received its first inference request.
func (n *node) arrived(t testing.TB) {
	t.Helper()
	if n.up != nil {
		select {
		case <-n.up.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream got no request")
		}
		return
	}
	// fakeengine signals nothing on arrival: poll its record.
	eventually(t, "the engine got a request", func() bool { return n.calls() > 0 })
}

// release lets a Late upstream answer (engines answer late by latency).
func (n *node) release() {
	if n.up != nil {
		n.up.Release()
	}
}

// waitIdle waits until the fake is handling no request.
func (n *node) waitIdle(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if n.up != nil {
		err = n.up.WaitIdle(ctx)
	} else {
		err = n.engine.WaitIdle(ctx)
	}
	if err != nil {
		t.Fatalf("node %s is still handling a request: %v", n.cfg.Name, err)
	}
}

func (n *node) close() {
	if n.up != nil {
		n.up.Close()
	} else {
		n.engine.Close()
	}
}
