// Package fake is a System One endpoint for tests: it answers POST
// /v1/systemone as told (an answer, a refusal, garbage, or nothing at
// all), counts the calls it gets, and answers GET /health and GET
// /v1/models for probes.
package fake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"system1/internal/decision"
	"system1/internal/systemone"
)

// Reply says how the endpoint answers a question.
type Reply struct {
	// Probs are the probabilities of a choice's options in order, or
	// [P(yes)] for a noul. Empty gives a choice's first option 0.9 and
	// spreads the rest; a noul gets 0.9.
	Probs []float64
	// Status, when set, refuses with that HTTP status and Message.
	Status  int
	Message string
	// Raw, when set, is sent verbatim with status 200.
	Raw string
	// Hang never answers: the request waits until the caller gives up.
	Hang bool
	// Abstain marks the answer abstained, as laya-serve's gate does.
	Abstain bool
	// Model is the model reported; default "fake-1".
	Model string
}

// Server is a running fake endpoint.
type Server struct {
	*httptest.Server
	// Calls counts POST /v1/systemone requests; Probes counts GET /health
	// and GET /v1/models.
	Calls, Probes atomic.Int64
	// Last is the last request body received.
	last atomic.Value
}

// LastRequest is the last POST /v1/systemone body, or "".
func (s *Server) LastRequest() string {
	v, _ := s.last.Load().(string)
	return v
}

// Start runs an endpoint answering with r until the test ends.
func Start(t testing.TB, r Reply) *Server {
	t.Helper()
	s := &Server{}
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		s.Probes.Add(1)
		writeJSON(w, http.StatusOK, `{"status":"ok"}`)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		s.Probes.Add(1)
		writeJSON(w, http.StatusOK, `{"models":[{"name":"fake-1","description":"a fake","release_date":"2026-01-01"}]}`)
	})
	mux.HandleFunc("POST /v1/systemone", func(w http.ResponseWriter, req *http.Request) {
		s.Calls.Add(1)
		body, _ := io.ReadAll(req.Body)
		s.last.Store(string(body))
		switch {
		case r.Hang:
			select {
			case <-req.Context().Done():
			case <-done:
			}
			return
		case r.Status != 0:
			writeJSON(w, r.Status, fmt.Sprintf(`{"detail":%q}`, r.Message))
			return
		case r.Raw != "":
			writeJSON(w, http.StatusOK, r.Raw)
			return
		}
		p := systemone.ParseRequest(body)
		if len(p.Problems) > 0 || len(p.Questions) == 0 {
			writeJSON(w, http.StatusUnprocessableEntity, `{"detail":"the fake could not read the request"}`)
			return
		}
		writeJSON(w, http.StatusOK, answer(p.Questions[0], r))
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(done) }) // runs first: frees hanging handlers so Close returns
	return s
}

// Down returns a URL where nothing listens.
func Down(t testing.TB) string {
	t.Helper()
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close()
	return url
}

func answer(q decision.Question, r Reply) string {
	model := r.Model
	if model == "" {
		model = "fake-1"
	}
	a := map[string]any{"type": string(q.Kind)}
	switch q.Kind {
	case decision.Noul:
		p := 0.9
		if len(r.Probs) > 0 {
			p = r.Probs[0]
		}
		a["noul"] = p
	default:
		probs := r.Probs
		if len(probs) != len(q.Options) {
			probs = make([]float64, len(q.Options))
			probs[0] = 0.9
			for i := 1; i < len(probs); i++ {
				probs[i] = 0.1 / float64(len(probs)-1)
			}
		}
		d := decision.Distribution(probs)
		m := map[string]float64{}
		for i, o := range q.Options {
			m[o.Key] = probs[i]
		}
		a["choice"] = q.Options[d.Argmax()].Key
		a["confidence"] = decision.ChoiceConfidence(d)
		a["probabilities"] = m
	}
	if r.Abstain {
		a["abstention"] = "abstained"
		a["abstention_threshold"] = 0.95
		a["low_confidence"] = true
	}
	b, _ := json.Marshal(map[string]any{
		"model":   model,
		"answers": map[string]any{q.ID: a},
		"usage":   map[string]int{"input_tokens": 10, "output_tokens": 1},
	})
	return string(b)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
