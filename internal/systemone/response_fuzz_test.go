package systemone

import (
	"math"
	"reflect"
	"testing"

	"system1/internal/decision"
)

// fuzzFallbackRequest is asked when the fuzzed request is not a valid one:
// the reply, not the request, is the outside input under test.
const fuzzFallbackRequest = `{"model":"jev-latest","state":"s","questions":{
	"urgent":{"type":"noul"},
	"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}},
	"mood":{"type":"score","criteria":["Calm",{"x":1},"Very angry"]}}}`

// FuzzParseResponse feeds ParseResponse any reply to any valid request (a
// fixed one when the fuzzed request is not valid). It must never panic,
// and a reply it accepts must be one every client can use: each asked
// question answered with its type, probabilities finite in [0,1] summing to
// 1 within promptfoo's tolerance, a choice among the options and an argmax,
// a score within the levels, and distributions that sum to 1 within 1e-9.
// What it accepts, system1 can write back out and read again unchanged.
func FuzzParseResponse(f *testing.F) {
	good := `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.3,"sales":0.1}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"legend":{"0":"a","1":"b","2":"c"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":1,"output_tokens":1}}`
	f.Add([]byte(fuzzFallbackRequest), []byte(good))
	f.Add([]byte(`{"model":"m","state":"s","questions":{"q":{"type":"choice","criteria":{"a":null,"b":"x"}}}}`),
		[]byte(`{"model":"m","answers":{"q":{"type":"choice","choice":"b","confidence":0.0,"probabilities":{"a":0.5,"b":0.5}}},"usage":{"input_tokens":null,"output_tokens":0}}`))
	f.Add([]byte(`{}`), []byte(`{"model":"m","answers":{},"usage":{}}`))
	f.Fuzz(func(t *testing.T, reqBody, body []byte) {
		p := ParseRequest(reqBody)
		if len(p.Validate(decision.DefaultLimits())) > 0 {
			p = ParseRequest([]byte(fuzzFallbackRequest))
		}
		req := p.Request
		r, err := ParseResponse(req, body)
		if err != nil {
			if r != nil {
				t.Fatalf("an error (%v) with a reply %+v", err, r)
			}
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		checkReply(t, req, r)

		// Passed on: written in system1's own shape, it reads back the same.
		out := Response{Model: r.Model, Questions: req.Questions, Answers: r.Answers, Usage: r.Usage}
		again, err := ParseResponse(req, out.AppendJSON(nil))
		if err != nil {
			t.Fatalf("an accepted reply, written back out, fails: %v\n%s", err, out.AppendJSON(nil))
		}
		if !reflect.DeepEqual(again.Answers, r.Answers) || again.Usage != r.Usage || again.Model != r.Model {
			t.Fatalf("round trip changed the reply:\n%+v\n%+v", r, again)
		}
	})
}

func checkReply(t *testing.T, req decision.Request, r *Reply) {
	t.Helper()
	if r.Model == "" || r.Usage.InputTokens < 0 || r.Usage.OutputTokens < 0 {
		t.Fatalf("model %q, usage %+v", r.Model, r.Usage)
	}
	if len(r.Answers) != len(req.Questions) || len(r.Dists) != len(req.Questions) {
		t.Fatalf("%d answers and %d distributions for %d questions", len(r.Answers), len(r.Dists), len(req.Questions))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	for i, q := range req.Questions {
		a, d := r.Answers[i], r.Dists[i]
		if a.Kind != q.Kind {
			t.Fatalf("question %s (%s) answered as %s", q.ID, q.Kind, a.Kind)
		}
		if err := d.Check(len(q.Options)); err != nil {
			t.Fatalf("question %s: distribution %v: %v", q.ID, d, err)
		}
		if q.Kind == decision.Noul {
			if !finite(a.Noul) || a.Noul < 0 || a.Noul > 1 {
				t.Fatalf("question %s: noul %v", q.ID, a.Noul)
			}
			continue
		}
		if !finite(a.Confidence) || a.Confidence < 0 || a.Confidence > 1 {
			t.Fatalf("question %s: confidence %v", q.ID, a.Confidence)
		}
		if len(a.Probabilities) != len(q.Options) {
			t.Fatalf("question %s: %d probabilities for %d options", q.ID, len(a.Probabilities), len(q.Options))
		}
		var sum, top float64
		for _, p := range a.Probabilities {
			if !finite(p) || p < 0 || p > 1 {
				t.Fatalf("question %s: probability %v", q.ID, p)
			}
			sum += p
			top = math.Max(top, p)
		}
		if tol := math.Max(1e-4, float64(len(q.Options))*5e-7); math.Abs(sum-1) > tol {
			t.Fatalf("question %s: probabilities %v sum to %v", q.ID, a.Probabilities, sum)
		}
		switch q.Kind {
		case decision.Choice:
			i := q.OptionIndex(a.Choice)
			if i < 0 {
				t.Fatalf("question %s: choice %q is not an option", q.ID, a.Choice)
			}
			if a.Probabilities[i] != top {
				t.Fatalf("question %s: choice %q has %v, below the top %v", q.ID, a.Choice, a.Probabilities[i], top)
			}
		case decision.Score:
			if !finite(a.Score) || a.Score < 0 || a.Score > float64(len(q.Options)-1) {
				t.Fatalf("question %s: score %v for %d levels", q.ID, a.Score, len(q.Options))
			}
		}
	}
}
