package answer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

type records struct{ got []decisionlog.Record }

func (r *records) Record(rec decisionlog.Record) { r.got = append(r.got, rec) }

// serviceAt is the answer path over one llama.cpp node at url serving m,
// recording into rec.
func serviceAt(t *testing.T, url string, rec *records, local bool) *answer.Service {
	t.Helper()
	n, err := fleet.NewNode(config.Node{Name: "n", URL: url, Dialect: "llamacpp", Models: []string{"m"}, Timeout: config.Duration(2 * time.Second)},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{}), Recorder: rec, Local: local})
}

// serviceOver is the answer path over a fake llama.cpp node behaving as b.
func serviceOver(t *testing.T, b fakeengine.Behavior, rec *records) *answer.Service {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Behavior: b})
	t.Cleanup(f.Close)
	return serviceAt(t, f.URL, rec, false)
}

func twoQuestions(model string) answer.Request {
	q := colourQuestion("red", "green", "blue")
	yes := decision.Question{ID: "yes", Kind: decision.Noul, Instructions: json.RawMessage(`"Is it red?"`), Options: decision.NoulOptions(nil, nil)}
	return answer.Request{Request: decision.Request{Model: model, State: json.RawMessage(`"about red"`), Questions: []decision.Question{q, yes}},
		Face: decisionlog.FaceDecide, RequestID: "req_1", Start: time.Now().Add(-time.Millisecond)}
}

// Every question answered is recorded once, with who asked it; the
// answer carries each question's distribution, the engine's reading and
// the usage.
func TestAnswerRecordsEveryQuestion(t *testing.T) {
	var rec records
	svc := serviceOver(t, fakeengine.Behavior{}, &rec)
	req := twoQuestions("m")
	a, err := svc.Answer(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Model != "m" || len(a.Questions) != 2 || a.Usage.InputTokens == 0 || a.Calibrated || a.Fits != nil {
		t.Fatalf("answer %+v", a)
	}
	if len(rec.got) != 2 {
		t.Fatalf("%d records for 2 questions", len(rec.got))
	}
	for i, r := range rec.got {
		q := req.Questions[i]
		if r.RequestID != "req_1" || r.QuestionID != q.ID || r.Face != decisionlog.FaceDecide || r.Model != "m" || r.Node != "n" ||
			len(r.Options) != len(q.Options) || r.Latency <= 0 || r.LabelMass == nil || !same(r.Final, a.Questions[i].Dist) {
			t.Errorf("record %d: %+v", i, r)
		}
	}
}

func same(a []float64, b decision.Distribution) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A request not answered is a *Failure whose class a face maps to its
// status, with the longest pause a node asked for, and nothing is
// recorded.
func TestAnswerFailureClasses(t *testing.T) {
	for _, c := range []struct {
		name     string
		b        fakeengine.Behavior
		class    answer.Class
		question answer.Class
		wait     time.Duration
		cause    string
	}{
		{"engine refuses the request", fakeengine.Behavior{Fault: fakeengine.Status, Status: 422}, answer.CallerError, answer.CallerError, 0, "Unprocessable"},
		{"engine down", fakeengine.Behavior{Fault: fakeengine.Status, Status: 503}, answer.NoAnswer, answer.NoAnswer, 0, "Unavailable"},
		{"engine asks for a pause", fakeengine.Behavior{Fault: fakeengine.Status, Status: 429, RetryAfter: "7"}, answer.NoAnswer, answer.NoAnswer, 7 * time.Second, "Too Many"},
		{"engine hangs", fakeengine.Behavior{Fault: fakeengine.Hang}, answer.NoAnswer, answer.TimedOut, 0, ""},
		{"engine answers NaN", fakeengine.Behavior{Fault: fakeengine.NaN}, answer.NoAnswer, answer.Malformed, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec records
			svc := serviceOver(t, c.b, &rec)
			req := twoQuestions("m")
			req.Questions = req.Questions[:1]
			a, err := svc.Answer(t.Context(), req)
			f, ok := err.(*answer.Failure)
			if !ok || a != nil {
				t.Fatalf("answer %+v, error %v", a, err)
			}
			if f.Class != c.class || f.RetryAfter != c.wait || len(f.Problems) != 1 || f.Problems[0].Class != c.question || f.Problems[0].Question != "q" ||
				!strings.Contains(f.Problems[0].Cause, c.cause) || !strings.HasPrefix(f.Error(), `no answer for question(s) q: question "q": node n: `) {
				t.Errorf("failure %s, %s, %+v: %v", f.Class, f.RetryAfter, f.Problems, f)
			}
			if len(rec.got) != 0 {
				t.Errorf("a failure recorded %d answers", len(rec.got))
			}
		})
	}
}

// A model no node serves is its own class, in words a caller can act on.
func TestAnswerUnknownModel(t *testing.T) {
	svc := serviceOver(t, fakeengine.Behavior{}, nil)
	_, err := svc.Answer(t.Context(), twoQuestions("nope"))
	f, ok := err.(*answer.Failure)
	if !ok || f.Class != answer.UnknownModel || f.Error() != `model "nope" is not served by any node of this server` || len(f.Problems) != 0 {
		t.Fatalf("%#v", err)
	}
}

// A node's address never reaches a remote caller: the failure's words
// have it taken out, and only its Err, for the operator's log, keeps it.
// A local face's failure keeps it.
func TestAnswerRedactsForRemoteCallers(t *testing.T) {
	down := fakeengine.Down(t)
	host := strings.TrimPrefix(down, "http://")
	for _, local := range []bool{false, true} {
		svc := serviceAt(t, down, nil, local)
		_, err := svc.Answer(context.Background(), twoQuestions("m"))
		f, ok := err.(*answer.Failure)
		if !ok || len(f.Problems) != 2 {
			t.Fatalf("local %v: %v", local, err)
		}
		p := f.Problems[0]
		shown := strings.Contains(f.Error(), host) || strings.Contains(p.Message, host) || strings.Contains(p.Cause, host)
		if shown != local || !strings.Contains(p.Err.Error(), host) {
			t.Errorf("local %v: address shown %v in %q (cause %q); log error %q", local, shown, f.Error(), p.Cause, p.Err)
		}
	}
}
