// Package tracing_test sends traces to a real collector (Jaeger, started
// by startJaeger) through a server wired with internal/tracing as
// system1's faces and fleet are, and measures tracing's cost on and off.
package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"system1/internal/decision"
	"system1/internal/tracing"
)

// engine is a fake engine that remembers the traceparent of each call;
// a call to /down is a node that is down (503).
type engine struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
}

func newEngine(t testing.TB) *engine {
	e := &engine{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.parents = append(e.parents, r.Header.Get("traceparent"))
		e.mu.Unlock()
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"content":"A"}`)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *engine) traceparents() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.parents...)
}

// Model and the nodes the wired server asks.
const (
	model    = "stories260k"
	downNode = "gpu-down"
	upNode   = "gpu-1"
	dialect  = "llamacpp"
)

// questions are n choice questions of 3 options.
func questions(n int) []decision.Question {
	qs := make([]decision.Question, n)
	for i := range qs {
		qs[i] = decision.Question{ID: fmt.Sprintf("q%d", i), Kind: decision.Choice, Options: []decision.Option{{Key: "a"}, {Key: "b"}, {Key: "c"}}}
	}
	return qs
}

// wired is a server wired as the lead wires system1: the middleware
// opens the request's span and closes it with the route and status; the
// handler opens a span per question and one per engine attempt, sends
// the traceparent on with each engine call, and records each attempt's
// outcome. The first question's first attempt goes to a node that is
// down and fails over, as the fleet does. ask makes one engine call.
func wired(tr *tracing.Tracer, ask func(ctx context.Context, node string) error, qs []decision.Question) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/systemone", func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		state, _ := io.ReadAll(r.Body)
		tracing.SetState(ctx, state)
		for i, q := range qs {
			qctx, qspan := tracing.StartQuestion(ctx, q)
			nodes := []string{upNode}
			if i == 0 {
				nodes = []string{downNode, upNode}
			}
			var err error
			for _, node := range nodes {
				actx, aspan := tracing.StartAttempt(qctx, node, model, dialect)
				err = ask(actx, node)
				if err != nil {
					tracing.EndAttempt(aspan, tracing.Attempt{Outcome: "unavailable", Err: err})
					continue
				}
				tracing.EndAttempt(aspan, tracing.Attempt{Outcome: "ok", InputTokens: 24, OutputTokens: 1, LabelMass: 0.93})
				break
			}
			outcome := "answered"
			if err != nil {
				outcome = "failed"
			}
			tracing.EndQuestion(qspan, outcome, err)
		}
		io.WriteString(w, `{"answers":{}}`)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tr.StartRequest(r.Context(), r, "req-test")
		r = r.WithContext(ctx)
		rec := &status{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(rec, r)
		tracing.EndRequest(span, r, rec.code)
	})
}

// call is one engine call, as httpcall.Do makes it, with the span's
// traceparent injected.
func (e *engine) call(ctx context.Context, node string) error {
	path := "/ok"
	if node == downNode {
		path = "/down"
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		return err
	}
	tracing.Inject(ctx, hr.Header)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New("HTTP " + resp.Status)
	}
	return nil
}

type status struct {
	http.ResponseWriter
	code int
}

func (s *status) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
