package decisionsapi

import (
	"math"
	"testing"

	"system1/internal/decision"
)

// fuzzFallbackRequest is asked when the fuzzed request is not a valid
// one: the reply, not the request, is the outside input under test.
const fuzzFallbackRequest = `{"model":"m","input":"s","questions":[
	{"type":"predicate","name":"urgent","instructions":"?"},
	{"type":"choice","name":"dept","instructions":"?","choices":[{"value":"billing"},{"value":"technical"},{"value":"sales"}]},
	{"type":"score","name":"mood","instructions":"?","levels":[{"label":"Calm"},{"label":"Upset","description":"x"},{"label":"Angry"}]}]}`

// FuzzParseResponse feeds ParseResponse any reply to any valid request (a
// fixed one when the fuzzed request is not valid). It must never panic,
// and a reply it accepts must be one every client can use: each question
// answered with its type or refused, probabilities in [0,1] summing to 1
// within the AI SDK's tolerance, a choice among the options within the AI
// SDK's tolerance of the top, a score within the levels and near its
// mean, distributions that sum to 1. What it accepts, system1's server
// side writes back out in a form the client side accepts again.
func FuzzParseResponse(f *testing.F) {
	good := `{"model":"m","answers":[{"type":"predicate","name":"urgent","probability":0.5},` +
		`{"type":"choice","name":"dept","choice":"billing","confidence":0.5,"probabilities":[{"value":"billing","probability":0.6},{"value":"technical","probability":0.3},{"value":"sales","probability":0.1}]},` +
		`{"type":"score","name":"mood","score":1,"confidence":0.5,"probabilities":[{"value":0,"label":"Calm","probability":0.1},{"value":1,"label":"Upset","probability":0.8},{"value":2,"label":"Angry","probability":0.1}]}],` +
		`"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2}}`
	f.Add([]byte(fuzzFallbackRequest), []byte(good))
	f.Add([]byte(`{"model":"m","input":"s","questions":[{"type":"choice","instructions":"?","choices":[{"value":"a"},{"value":true}]}]}`),
		[]byte(`{"model":"m","answers":[{"type":"choice","name":"questions[0]","choice":"true","confidence":0,"probabilities":[{"value":"a","probability":0.5},{"value":"true","probability":0.5}]}],"usage":{"input_tokens":0,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":0}}`))
	f.Add([]byte(`{}`), []byte(`{"model":"m","answers":[{"type":"refusal","name":"urgent"},{"type":"refusal","name":"dept"},{"type":"refusal","name":"mood"}],"usage":{}}`))
	f.Fuzz(func(t *testing.T, reqBody, body []byte) {
		p := ParseRequest(reqBody)
		if p.Validate(decision.DefaultLimits()) != nil {
			p = ParseRequest([]byte(fuzzFallbackRequest))
		}
		req := p.Request
		r, err := ParseResponse(req, body)
		if err != nil {
			if r != nil || err.Error() == "" {
				t.Fatalf("error %q with reply %+v", err, r)
			}
			return
		}
		checkReply(t, req, r)

		// Passed on through system1's own server side, it reads back.
		again := ParseRequest(AppendRequest(nil, req))
		if e := again.Validate(decision.DefaultLimits()); e != nil {
			t.Fatalf("the client's request fails the server: %v", e)
		}
		out, err := (&Response{Model: r.Model, Request: again, Dists: r.Dists, Refused: r.Refused, Usage: r.Usage}).AppendJSON(nil)
		if err != nil {
			t.Fatalf("an accepted reply cannot be written back: %v", err)
		}
		if err := CheckResponse(req, out); err != nil {
			t.Fatalf("an accepted reply, written back out, fails: %v\n%s", err, out)
		}
		back, err := ParseResponse(req, out)
		if err != nil {
			t.Fatalf("an accepted reply, written back out, fails: %v\n%s", err, out)
		}
		checkReply(t, req, back)
		for i, d := range r.Dists {
			for j := range d {
				if math.Abs(back.Dists[i][j]-d[j]) > 0.01+1e-9 {
					t.Fatalf("question %d: %v came back as %v", i, d, back.Dists[i])
				}
			}
		}
		if back.Usage != r.Usage || back.Model != r.Model {
			t.Fatalf("usage %+v model %q came back as %+v %q", r.Usage, r.Model, back.Usage, back.Model)
		}
	})
}

func checkReply(t *testing.T, req decision.Request, r *Reply) {
	t.Helper()
	n := len(req.Questions)
	if r.Model == "" || len(r.Answers) != n || len(r.Dists) != n || len(r.Refused) != n {
		t.Fatalf("model %q, %d answers, %d distributions, %d refusals for %d questions", r.Model, len(r.Answers), len(r.Dists), len(r.Refused), n)
	}
	for _, c := range []int{r.Usage.InputTokens, r.Usage.CachedTokens, r.Usage.CacheWriteTokens, r.Usage.OutputTokens, r.Usage.ReasoningTokens} {
		if c < 0 {
			t.Fatalf("usage %+v", r.Usage)
		}
	}
	unit := func(x float64) bool { return !math.IsNaN(x) && x >= 0 && x <= 1 }
	for i, q := range req.Questions {
		a, d := r.Answers[i], r.Dists[i]
		if r.Refused[i] {
			if d != nil {
				t.Fatalf("question %s refused with a distribution %v", q.ID, d)
			}
			continue
		}
		if a.Kind != q.Kind {
			t.Fatalf("question %s (%s) answered as %s", q.ID, q.Kind, a.Kind)
		}
		if err := d.Check(len(q.Options)); err != nil {
			t.Fatalf("question %s: distribution %v: %v", q.ID, d, err)
		}
		if q.Kind == decision.Noul {
			if !unit(a.Noul) {
				t.Fatalf("question %s: probability %v", q.ID, a.Noul)
			}
			continue
		}
		if !unit(a.Confidence) || len(a.Probabilities) != len(q.Options) {
			t.Fatalf("question %s: %+v", q.ID, a)
		}
		var sum, top, mean float64
		for j, p := range a.Probabilities {
			if !unit(p) {
				t.Fatalf("question %s: probability %v", q.ID, p)
			}
			sum += p
			top = math.Max(top, p)
			mean += float64(j) * p
		}
		if math.Abs(sum-1) > 0.01+1e-12 {
			t.Fatalf("question %s: %v sums to %v", q.ID, a.Probabilities, sum)
		}
		switch q.Kind {
		case decision.Choice:
			c := q.OptionIndex(a.Choice)
			if c < 0 || a.Probabilities[c] < top-0.01-1e-6 {
				t.Fatalf("question %s: choice %q among %v", q.ID, a.Choice, a.Probabilities)
			}
		case decision.Score:
			k := float64(len(q.Options))
			if a.Score < 0 || a.Score > k-1 || math.Abs(a.Score-mean) > 0.01*(k-1)+1e-9 {
				t.Fatalf("question %s: score %v, mean %v", q.ID, a.Score, mean)
			}
		}
	}
}
