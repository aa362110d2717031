package jobs

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/systemone"
)

// testQuestions is the tests' questions file: a noul and a choice.
const testQuestions = `{"urgent":{"type":"noul","instructions":"Urgent?"},` +
	`"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":"money","tech":"bugs","sales":"deals"}}}`

func testJob(t testing.TB) decision.Request {
	t.Helper()
	job, err := ParseQuestions([]byte(testQuestions), "m1", decision.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// dists is the answer every decider of the tests gives to a state: a
// function of the state's bytes alone, so that any run, resumed or not,
// local or over HTTP, writes the same answers.
func dists(state []byte) []decision.Distribution {
	h := fnv.New32a()
	h.Write(state)
	v := h.Sum32()
	p := float64(v%89+5) / 100
	top := int(v/89) % 3
	d := decision.Distribution{0.15, 0.15, 0.15}
	d[top] = 0.7
	return []decision.Distribution{{p, 1 - p}, d}
}

// answersFor is dists as a Result.
func answersFor(job decision.Request, state []byte) (Result, error) {
	res := Result{Model: "fake-1", Usage: systemone.Usage{InputTokens: len(state), OutputTokens: 1}}
	for i, q := range job.Questions {
		a, err := decision.NewAnswer(q, dists(state)[i], 2)
		if err != nil {
			return Result{}, err
		}
		res.Answers = append(res.Answers, a)
	}
	return res, nil
}

// fakeDecider answers in process with answersFor, after delay (if any),
// failing with fail's error where it gives one.
type fakeDecider struct {
	capacity int
	delay    func(state []byte) time.Duration
	fail     func(state []byte) error
	calls    atomic.Int64
	mu       sync.Mutex
	asked    map[string]int // state -> times asked
}

func (f *fakeDecider) Decide(ctx context.Context, req decision.Request) (Result, error) {
	f.calls.Add(1)
	f.mu.Lock()
	if f.asked == nil {
		f.asked = map[string]int{}
	}
	f.asked[string(req.State)]++
	f.mu.Unlock()
	if f.delay != nil {
		select {
		case <-time.After(f.delay(req.State)):
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	if f.fail != nil {
		if err := f.fail(req.State); err != nil {
			return Result{}, err
		}
	}
	return answersFor(req, req.State)
}

func (f *fakeDecider) Capacity(context.Context, decision.Request) int { return f.capacity }

// writeRows writes n JSONL rows with ids "r0".."r<n-1>" and states
// {"text": "row <i>"}, and returns the file's path.
func writeRows(t testing.TB, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "in.jsonl")
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"id":"r%d","state":{"text":"row %d"}}`+"\n", i, i)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// outLine is one line of the answers, read back.
type outLine struct {
	ID      json.RawMessage            `json:"id"`
	Model   string                     `json:"model"`
	Answers map[string]json.RawMessage `json:"answers"`
	Usage   map[string]int             `json:"usage"`
	Error   *rowError                  `json:"error"`
}

// readOut reads the answers file, failing on a line that is not whole
// JSON.
func readOut(t testing.TB, path string) []outLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []outLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l outLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d %q: %v", len(out)+1, sc.Text(), err)
		}
		out = append(out, l)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("the answers end without a newline: %q", data[max(0, len(data)-80):])
	}
	return out
}

// checkAnswers asserts that out holds rows r0..r<n-1> exactly once each,
// in order, each with the answers dists gives its state.
func checkAnswers(t testing.TB, out []outLine, n int) {
	t.Helper()
	if len(out) != n {
		t.Fatalf("%d lines, want %d", len(out), n)
	}
	job := testJob(t)
	for i, l := range out {
		if want := fmt.Sprintf(`"r%d"`, i); string(l.ID) != want {
			t.Fatalf("line %d has id %s, want %s", i+1, l.ID, want)
		}
		if l.Error != nil {
			t.Fatalf("line %d: error %+v", i+1, l.Error)
		}
		want, _ := answersFor(job, fmt.Appendf(nil, `{"text":"row %d"}`, i))
		var noul struct{ Noul float64 }
		var choice struct{ Choice string }
		_ = json.Unmarshal(l.Answers["urgent"], &noul)
		_ = json.Unmarshal(l.Answers["dept"], &choice)
		if noul.Noul != want.Answers[0].Noul || choice.Choice != want.Answers[1].Choice {
			t.Fatalf("line %d: %s %s, want noul %v choice %s", i+1, l.Answers["urgent"], l.Answers["dept"], want.Answers[0].Noul, want.Answers[1].Choice)
		}
	}
}

// jevServer is a fake System One endpoint: POST /v1/systemone answers
// each state with dists, after delay (a batch after delay per state); with
// batch, POST
// /v1/systemone/batch answers laya-serve's shape; GET /health reports
// health's body.
type jevServer struct {
	delay  time.Duration
	batch  bool
	health string
	// reply, when set, may answer a request instead (status, body).
	reply func(path string, body []byte) (int, string, bool)
	// retryAfter is the Retry-After of reply's 429s and 503s (0.01
	// where empty).
	retryAfter string
	// holdFrom, when above 0, holds a request whose first state is row
	// holdFrom or later (writeRows' numbering) until it is lowered, or
	// the client gives up: a run then stops short of the end, however
	// fast the machine.
	holdFrom atomic.Int64

	singles, batches atomic.Int64
	healthAuth       atomic.Value // the Authorization /health was last asked with
}

func (s *jevServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/health" {
		s.healthAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		h := s.health
		if h == "" {
			h = `{"status":"ok"}`
		}
		_, _ = io.WriteString(w, h)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if s.reply != nil {
		if code, b, ok := s.reply(r.URL.Path, body); ok {
			if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", cmp.Or(s.retryAfter, "0.01"))
			}
			w.WriteHeader(code)
			_, _ = io.WriteString(w, b)
			return
		}
	}
	switch {
	case r.URL.Path == "/v1/systemone":
		time.Sleep(s.delay)
		s.hold(r.Context(), body)
		s.singles.Add(1)
		p := systemone.ParseRequest(body)
		if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write(systemone.AppendValidationError(nil, systemone.InBody, ps))
			return
		}
		_, _ = w.Write(respond(p.Request))
	case r.URL.Path == "/v1/systemone/batch" && s.batch:
		s.batches.Add(1)
		var b struct {
			Model     string            `json:"model"`
			States    []json.RawMessage `json:"states"`
			Questions json.RawMessage   `json:"questions"`
		}
		if err := json.Unmarshal(body, &b); err != nil || len(b.States) == 0 || len(b.States) > systemone.MaxBatchStates {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		time.Sleep(s.delay * time.Duration(len(b.States))) // a state's worth each
		s.hold(r.Context(), b.States[0])
		var out bytes.Buffer
		out.WriteString(`{"results":[`)
		for i, st := range b.States {
			m, _ := json.Marshal(b.Model)
			p := systemone.ParseRequest(fmt.Appendf(nil, `{"model":%s,"state":%s,"questions":%s}`, m, st, b.Questions))
			if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = w.Write(systemone.AppendValidationError(nil, systemone.InBody, ps))
				return
			}
			if i > 0 {
				out.WriteByte(',')
			}
			out.Write(respond(p.Request))
		}
		out.WriteString(`],"total_usage":{}}`)
		_, _ = w.Write(out.Bytes())
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(systemone.NotFoundBody)
	}
}

// hold waits while the first row named in body is held (holdFrom).
func (s *jevServer) hold(ctx context.Context, body []byte) {
	_, after, _ := bytes.Cut(body, []byte(`"row `))
	var row int64
	if _, err := fmt.Sscanf(string(after), "%d", &row); err != nil {
		return
	}
	for {
		if from := s.holdFrom.Load(); from <= 0 || row < from || ctx.Err() != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// respond is the fake's Jev answer to req.
func respond(req decision.Request) []byte {
	res, _ := answersFor(req, req.State)
	r := systemone.Response{Model: res.Model, Questions: req.Questions, Answers: res.Answers, Usage: res.Usage}
	return r.AppendJSON(nil)
}

func newJevServer(t testing.TB, s *jevServer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// withoutLatency drops the latency_ms of answer lines, the one part of a
// line that differs from run to run.
func withoutLatency(data []byte) string {
	var b strings.Builder
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		if i := bytes.Index(l, []byte(`,"latency_ms":`)); i >= 0 {
			j := i + bytes.IndexByte(l[i:], '}')
			l = append(append([]byte{}, l[:i]...), l[j:]...)
		}
		b.Write(l)
	}
	return b.String()
}
