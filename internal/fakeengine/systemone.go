package fakeengine

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"system1/internal/decision"
	"system1/internal/systemone"
)

// The faults only a System One endpoint has, besides the engines'.
const (
	// OutsideOptions answers a choice with a key that is not one of the
	// options ("refunds"), the rest of the reply well-formed.
	OutsideOptions Fault = "outside-options"
	// Late holds the request, whatever the client does, until Release;
	// then it answers correctly, into a connection nobody reads.
	Late Fault = "late"
)

// The usage a fake System One endpoint reports for every request it
// answers, whatever its questions.
const (
	SystemOneInputTokens  = 10
	SystemOneOutputTokens = 1
)

// Reply says how a fake System One endpoint answers. The zero value
// answers every question, the first option of a choice or a score at 0.9
// and the rest spread evenly, a noul at 0.9.
type Reply struct {
	// Probs are a choice's or a score's probabilities in option order, or
	// [P(true)] for a noul; a question with another count of options gets
	// the default.
	Probs []float64
	// Dist, when set, gives each question its distribution over its n
	// options ([P(true), P(false)] for a noul), whatever Probs says.
	Dist func(n int) decision.Distribution
	// Status, when set, refuses with that HTTP status, Message (default
	// the status text) and RetryAfter.
	Status     int
	Message    string
	RetryAfter string
	// Raw, when set, is sent verbatim with status 200.
	Raw string
	// Abstain marks every answer abstained, as laya-serve's gate does; a
	// fake Decisions endpoint refuses every question instead.
	Abstain bool
	// Refuse names the questions a fake Decisions endpoint answers with
	// a refusal (a System One endpoint has no refusal).
	Refuse []string
	// Model is the model reported; default "fake-1".
	Model string
	// Fault misbehaves as on an engine where it can (Refuse, Hang,
	// Status, NotJSON, Stall), else as the System One reply's nearest
	// fault: NoLogprobs leaves the answers out, NullLogprobs makes them
	// null, EmptyChoices empty; NaN, PosInf, NegInf, NullLogprob,
	// Positive and MissingLabel hit the option at Label; OutsideOptions
	// and Late are this endpoint's own.
	Fault Fault
	Label int
}

// endpoint is what the fake hosted endpoints share: a server answering
// as a Reply that a test may change, counting its calls and probes and
// keeping the last request.
type endpoint struct {
	server
	// Calls counts the answering route's requests; Probes the GETs that
	// look at the endpoint.
	Calls, Probes atomic.Int64
	last          atomic.Value

	mu sync.Mutex
	r  Reply
}

// Set changes how the endpoint answers from the next request on: another
// model id in its answers and its model list, other distributions, a
// fault. A SystemOne reads Refuse only when it starts.
func (e *endpoint) Set(r Reply) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.r = r
}

func (e *endpoint) reply() Reply {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.r
}

// LastRequest is the last body the answering route got, or "".
func (e *endpoint) LastRequest() string {
	v, _ := e.last.Load().(string)
	return v
}

func (e *endpoint) called(body []byte) {
	e.Calls.Add(1)
	e.last.Store(string(body))
}

// SystemOne is a running fake System One endpoint: it answers POST
// /v1/systemone as its Reply says, counts the calls it gets (Calls), and
// answers GET /health and GET /v1/models for probes (Probes). It is the
// one fake System One endpoint of the tests.
type SystemOne struct {
	endpoint
	// Arrived gets a token per POST /v1/systemone, for a test to wait on.
	Arrived chan struct{}

	release     chan struct{} // closed by Release: Late handlers answer
	releaseOnce sync.Once
}

// NewSystemOne starts an endpoint answering as r. Close it when done.
func NewSystemOne(r Reply) *SystemOne {
	s := &SystemOne{endpoint: endpoint{r: r}, release: make(chan struct{}), Arrived: make(chan struct{}, 64)}
	s.listen(s.serve)
	if r.Fault == Refuse {
		s.refuse()
	}
	return s
}

// StartSystemOne runs an endpoint answering as r until the test ends.
func StartSystemOne(t testing.TB, r Reply) *SystemOne {
	t.Helper()
	s := NewSystemOne(r)
	t.Cleanup(s.Close)
	return s
}

// Down returns a URL where nothing listens until the test ends: its port
// is held, bound and not listening, so that connections are refused and
// no other server takes it.
func Down(t testing.TB) string {
	t.Helper()
	if h, err := holdPort(0); err == nil {
		t.Cleanup(func() { h.Close() })
		return fmt.Sprintf("http://127.0.0.1:%d", h.Port())
	}
	s := httptest.NewServer(http.NotFoundHandler()) // no port can be held: one free now
	url := s.URL
	s.Close()
	return url
}

// Release lets Late requests answer.
func (s *SystemOne) Release() { s.releaseOnce.Do(func() { close(s.release) }) }

func (r Reply) model() string { return cmp.Or(r.Model, "fake-1") }

func (s *SystemOne) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r := s.reply()
	switch {
	case req.Method == http.MethodGet && req.URL.Path == "/health":
		s.Probes.Add(1)
		writeBody(w, http.StatusOK, `{"status":"ok"}`)
		return
	case req.Method == http.MethodGet && req.URL.Path == "/v1/models":
		s.Probes.Add(1)
		writeBody(w, http.StatusOK, fmt.Sprintf(`{"models":[{"name":%q,"description":"a fake","release_date":"2026-01-01"}]}`, r.model()))
		return
	case req.Method != http.MethodPost || req.URL.Path != "/v1/systemone":
		writeBody(w, http.StatusNotFound, `{"detail":"Not Found"}`)
		return
	}
	s.called(body)
	select {
	case s.Arrived <- struct{}{}:
	default:
	}
	switch {
	case r.Fault == Hang:
		s.block(req)
		return
	case r.Fault == Late:
		select { // the client is not watched: the answer comes late, whatever happened
		case <-s.release:
		case <-s.done:
			return
		}
	case r.Status != 0:
		if r.RetryAfter != "" {
			w.Header().Set("Retry-After", r.RetryAfter)
		}
		writeBody(w, r.Status, fmt.Sprintf(`{"detail":%q}`, cmp.Or(r.Message, http.StatusText(r.Status))))
		return
	case r.Fault == NotJSON:
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		return
	case r.Raw != "":
		writeBody(w, http.StatusOK, r.Raw)
		return
	}
	p := systemone.ParseRequest(body)
	if len(p.Problems) > 0 || len(p.Questions) == 0 {
		writeBody(w, http.StatusUnprocessableEntity, `{"detail":"the fake could not read the request"}`)
		return
	}
	reply := r.answer(p.Request)
	if r.Fault == Stall {
		s.stall(w, req, []byte(reply))
		return
	}
	writeBody(w, http.StatusOK, reply)
}

// dist is a question's distribution over its n options.
func (r Reply) dist(q decision.Question) decision.Distribution {
	n := len(q.Options)
	if r.Dist != nil {
		return r.Dist(n)
	}
	if q.Kind == decision.Noul {
		p := 0.9
		if len(r.Probs) > 0 {
			p = r.Probs[0]
		}
		return decision.Distribution{p, 1 - p}
	}
	if len(r.Probs) == n {
		return decision.Distribution(r.Probs)
	}
	d := slices.Repeat(decision.Distribution{0.1 / float64(n-1)}, n)
	d[0] = 0.9
	return d
}

// answer writes the reply to req, with the fault's damage.
func (r Reply) answer(req decision.Request) string {
	f, hit := r.Fault, r.Label
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var answers []string
	for _, q := range req.Questions {
		d := r.dist(q)
		var a string
		switch q.Kind {
		case decision.Noul:
			v := num(d[0])
			if f == NullLogprob {
				v = "null"
			}
			a = fmt.Sprintf(`{"type":"noul","noul":%s`, v)
		case decision.Choice, decision.Score:
			var ps []string
			for i, o := range q.Options {
				v := num(d[i])
				if i == hit {
					switch f {
					case NaN, PosInf, NegInf:
						v = literals[f]
					case NullLogprob:
						v = "null"
					case Positive:
						v = "1.5"
					case MissingLabel:
						continue
					}
				}
				ps = append(ps, fmt.Sprintf("%q:%s", o.Key, v))
			}
			if q.Kind == decision.Score {
				legend := make([]string, len(q.Options))
				for i, o := range q.Options {
					legend[i] = fmt.Sprintf("%q:%s", o.Key, cmp.Or(string(o.Legend), "null"))
				}
				a = fmt.Sprintf(`{"type":"score","score":%s,"confidence":%s,"legend":{%s},"probabilities":{%s}`,
					num(decision.ExpectedLevel(d)), num(decision.ScoreConfidence(d)), strings.Join(legend, ","), strings.Join(ps, ","))
				break
			}
			choice := q.Options[d.Argmax()].Key
			if f == OutsideOptions {
				choice = "refunds"
			}
			a = fmt.Sprintf(`{"type":"choice","choice":%q,"confidence":%s,"probabilities":{%s}`,
				choice, num(decision.ChoiceConfidence(d)), strings.Join(ps, ","))
		}
		if r.Abstain {
			a += `,"abstention":"abstained","abstention_threshold":0.95,"low_confidence":true`
		}
		answers = append(answers, fmt.Sprintf("%q:%s}", q.ID, a))
	}
	all := "{" + strings.Join(answers, ",") + "}"
	switch f {
	case NoLogprobs:
		return fmt.Sprintf(`{"model":%q,"usage":{"input_tokens":%d,"output_tokens":%d}}`, r.model(), SystemOneInputTokens, SystemOneOutputTokens)
	case NullLogprobs:
		all = "null"
	case EmptyChoices:
		all = "{}"
	}
	return fmt.Sprintf(`{"model":%q,"answers":%s,"usage":{"input_tokens":%d,"output_tokens":%d}}`, r.model(), all, SystemOneInputTokens, SystemOneOutputTokens)
}

func writeBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
