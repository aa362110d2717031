package decisionsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/jsonx"
	"system1/internal/systemone"
)

func TestResponseGolden(t *testing.T) {
	p := parseOK(t, `{"model":"gpt-6-luna","input":"I was charged twice.","questions":[
		{"type":"predicate","name":"duplicate_charge","instructions":"Was the customer charged twice?"},
		{"type":"choice","name":"category","instructions":"Which team?","choices":[{"value":"billing"},{"value":"technical"},{"value":true}]},
		{"type":"score","instructions":"How blocked?","levels":[{"label":"Routine"},{"label":"Degraded"},{"label":"Blocked","description":"cannot work"}]},
		{"type":"predicate","name":"other_q","instructions":"?"}]}`)
	r := Response{Model: "tiny-3b", Request: p,
		Dists:   []decision.Distribution{{.931, .069}, {.8812, .1188, 0}, {.001, .949, .05}, nil},
		Refused: []bool{false, false, false, true},
		Usage:   Usage{InputTokens: 318, CachedTokens: 256, OutputTokens: 4}}
	got, err := r.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"tiny-3b","answers":[` +
		`{"type":"predicate","name":"duplicate_charge","probability":0.93},` +
		`{"type":"choice","name":"category","choice":"billing","confidence":0.82,"probabilities":[{"value":"billing","probability":0.88},{"value":"technical","probability":0.12},{"value":true,"probability":0}]},` +
		`{"type":"score","name":null,"score":1.05,"confidence":0.92,"probabilities":[{"value":0,"label":"Routine","probability":0},{"value":1,"label":"Degraded","probability":0.95},{"value":2,"label":"Blocked","probability":0.05}]},` +
		`{"type":"refusal","name":"other_q"}],` +
		`"usage":{"input_tokens":318,"input_tokens_details":{"cached_tokens":256,"cache_write_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":322}}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestResponseRefusesToMakeUpAnswers(t *testing.T) {
	p := parseOK(t, `{"model":"m","input":"s","questions":[{"type":"predicate","instructions":"?"},{"type":"choice","choices":[{"value":"a"},{"value":"b"}]}]}`)
	for name, r := range map[string]Response{
		"a missing distribution":     {Request: p, Dists: []decision.Distribution{{.5, .5}, nil}},
		"a distribution of NaNs":     {Request: p, Dists: []decision.Distribution{{.5, .5}, {math.NaN(), 1}}},
		"too few distributions":      {Request: p, Dists: []decision.Distribution{{.5, .5}}},
		"a distribution not summing": {Request: p, Dists: []decision.Distribution{{.5, .5}, {.5, .6}}},
		"refusals misaligned":        {Request: p, Dists: []decision.Distribution{{.5, .5}, {.5, .5}}, Refused: []bool{true}},
		"no request":                 {Dists: []decision.Distribution{{.5, .5}}},
	} {
		if b, err := r.AppendJSON(nil); err == nil {
			t.Errorf("%s: wrote %s", name, b)
		}
	}
}

// A choice between true, "true" and false comes back typed: the choice
// and each value as the JSON type it was asked with.
func TestBooleanChoiceComesBackTyped(t *testing.T) {
	p := parseOK(t, `{"model":"m","input":"The sky is blue.","questions":[
		{"type":"choice","name":"claim","instructions":"Is the claim true?","choices":[{"value":true},{"value":"true"},{"value":false}]},
		{"type":"choice","name":"flip","instructions":"?","choices":[{"value":false},{"value":"false"}]}]}`)
	r := Response{Model: "m", Request: p, Dists: []decision.Distribution{{.7, .2, .1}, {.3, .7}}}
	b, err := r.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Answers []struct {
			Choice        any `json:"choice"`
			Probabilities []struct {
				Value any `json:"value"`
			} `json:"probabilities"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	if got := body.Answers[0].Choice; got != true {
		t.Errorf("choice %#v, want the boolean true", got)
	}
	if got := body.Answers[1].Choice; got != "false" {
		t.Errorf("choice %#v, want the string \"false\"", got)
	}
	var values []any
	for _, a := range body.Answers {
		for _, pr := range a.Probabilities {
			values = append(values, pr.Value)
		}
	}
	if want := []any{true, "true", false, false, "false"}; !reflect.DeepEqual(values, want) {
		t.Errorf("values %#v, want %#v", values, want)
	}
}

// Largest-remainder rounding can move the printed mean of many levels
// further from the unrounded score than the clients allow (promptfoo:
// 0.01 per level step). Then the score written is the printed mean.
func TestScoreStaysConsistentWithWhatIsPrinted(t *testing.T) {
	// Ten levels whose remainders are all about 0.5: the five units left
	// go to the five lowest levels, and the printed distribution is
	// uniform (mean 4.5) while the unrounded mean is 4.62.
	d := decision.Distribution{.0952, .0952, .0952, .0952, .0952, .1048, .1048, .1048, .1048, .1048}
	levels := make([]string, len(d))
	for i := range levels {
		levels[i] = `{"label":"` + string(rune('a'+i)) + `"}`
	}
	body := `{"model":"m","input":"s","questions":[{"type":"score","name":"s","instructions":"?","levels":[` + strings.Join(levels, ",") + `]}]}`
	p := parseOK(t, body)
	a, err := decision.NewAnswer(p.Questions[0], d, Places)
	if err != nil {
		t.Fatal(err)
	}
	var printed float64
	for i, pr := range a.Probabilities {
		printed += float64(i) * pr
	}
	if diff := math.Abs(a.Score - printed); diff <= 0.09 {
		t.Fatalf("the case no longer strays (score %v, printed mean %v): pick another", a.Score, printed)
	}
	out, err := (&Response{Model: "m", Request: p, Dists: []decision.Distribution{d}}).AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckResponse(p.Request, out); err != nil {
		t.Fatalf("the clients would refuse the reply: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"score":4.5,`) {
		t.Fatalf("score is not the printed mean 4.5: %s", out)
	}
}

// sampleRequest is a client request as the fleet would send one: every
// question named by its id.
func sampleRequest(t *testing.T) decision.Request {
	t.Helper()
	p := systemone.ParseRequest([]byte(`{"model":"m","state":{"ticket":"I was charged twice","plan":"pro"},"questions":{
		"urgent":{"type":"noul","instructions":"Is it urgent?","criteria":{"true":"needs action today"}},
		"dept":{"type":"choice","instructions":{"ask":"Which team?"},"criteria":{"billing":"money","technical":{"area":"bugs"},"sales":null}},
		"mood":{"type":"score","criteria":["Calm",{"level":"upset"},"Very angry"]},
		"named":{"type":"score","instructions":"How?","criteria":{"low":"barely","high":null}}}}`))
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatal(ps)
	}
	return p.Request
}

// A client request, read by this package's server side, answered and
// read back by its client side, carries the distributions through: the
// printed ones exactly, within a hundredth of what was read.
func TestRoundTrip(t *testing.T) {
	req := sampleRequest(t)
	body := AppendRequest(nil, req)
	p := ParseRequest(body)
	if e := p.Validate(decision.DefaultLimits()); e != nil {
		t.Fatalf("%s\n%v", body, e)
	}
	if len(p.Questions) != len(req.Questions) {
		t.Fatalf("%d questions, sent %d", len(p.Questions), len(req.Questions))
	}
	for i, q := range p.Questions {
		if q.ID != req.Questions[i].ID || q.Kind != req.Questions[i].Kind || len(q.Options) != len(req.Questions[i].Options) {
			t.Fatalf("question %d read as %+v", i, q)
		}
	}
	if jsonx.Text(p.State) != jsonx.Text(req.State) {
		t.Errorf("state %s, sent %s", p.State, req.State)
	}
	// The noul's criteria are in its instructions, as the AI SDK folds them.
	if got := jsonx.Text(p.Questions[0].Instructions); got != "Is it urgent?\n\nCriteria for true:\nneeds action today" {
		t.Errorf("noul instructions %q", got)
	}
	dists := []decision.Distribution{{.8123, .1877}, {.6054, .2913, .1033}, nil, {.25, .75}}
	out, err := (&Response{Model: "tiny", Request: p, Dists: dists, Refused: []bool{false, false, true, false}, Usage: Usage{InputTokens: 40, OutputTokens: 3}}).AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := ParseResponse(req, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if reply.Model != "tiny" || reply.Usage != (Usage{InputTokens: 40, OutputTokens: 3}) {
		t.Errorf("model %q usage %+v", reply.Model, reply.Usage)
	}
	if !reply.Refused[2] || reply.Dists[2] != nil {
		t.Errorf("the refusal came back as %v %v", reply.Refused[2], reply.Dists[2])
	}
	for i, d := range dists {
		if d == nil {
			continue
		}
		want, _ := decision.NewAnswer(req.Questions[i], d, Places)
		got := reply.Dists[i]
		if reply.Refused[i] || len(got) != len(d) {
			t.Fatalf("question %d: %v", i, got)
		}
		printed := want.Probabilities
		if req.Questions[i].Kind == decision.Noul {
			printed = []float64{want.Noul, 1 - want.Noul}
		}
		for j := range d {
			if math.Abs(got[j]-printed[j]) > 1e-12 || math.Abs(got[j]-d[j]) > 0.01 {
				t.Errorf("question %d: %v back for %v (printed %v)", i, got, d, printed)
			}
		}
		if want.Kind == decision.Choice && reply.Answers[i].Choice != want.Choice {
			t.Errorf("question %d: choice %q, want %q", i, reply.Answers[i].Choice, want.Choice)
		}
		if reply.Answers[i].Confidence != want.Confidence || reply.Answers[i].Score != want.Score {
			t.Errorf("question %d: %+v, want %+v", i, reply.Answers[i], want)
		}
	}
}

// goodReply answers sampleRequest, passing every client's checks.
const goodReply = `{"model":"m","answers":[` +
	`{"type":"predicate","name":"urgent","probability":0.5},` +
	`{"type":"choice","name":"dept","choice":"billing","confidence":0.4,"probabilities":[{"value":"billing","probability":0.6},{"value":"technical","probability":0.3},{"value":"sales","probability":0.1}]},` +
	`{"type":"score","name":"mood","score":1.0,"confidence":0.5,"probabilities":[{"value":0,"label":"Calm","probability":0.1},{"value":1,"label":"{\"level\":\"upset\"}","probability":0.8},{"value":2,"label":"Very angry","probability":0.1}]},` +
	`{"type":"refusal","name":"named"}],` +
	`"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":10}}`

// Each row breaks one rule a real client enforces (wire doc section 6).
func TestParseResponseRejects(t *testing.T) {
	req := sampleRequest(t)
	r, err := ParseResponse(req, []byte(goodReply))
	if err != nil {
		t.Fatalf("the good reply fails: %v", err)
	}
	if !r.Refused[3] || r.Dists[3] != nil || r.Refused[0] {
		t.Fatalf("refusals %v", r.Refused)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"not JSON", goodReply, `<html>`},
		{"no model (promptfoo)", `"model":"m",`, ``},
		{"an empty model (promptfoo)", `"model":"m"`, `"model":""`},
		{"a model that is not a string (tool runner)", `"model":"m"`, `"model":7`},
		{"no usage (tool runner, promptfoo)", `,"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":0,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":10}`, ``},
		{"no total (tool runner, promptfoo)", `,"total_tokens":10`, ``},
		{"empty detail objects (tool runner)", `{"cached_tokens":0,"cache_write_tokens":0}`, `{}`},
		{"no output details (tool runner)", `,"output_tokens_details":{"reasoning_tokens":0}`, ``},
		{"a fractional count (tool runner)", `"cached_tokens":0`, `"cached_tokens":0.5`},
		{"a negative count (promptfoo)", `"output_tokens":0`, `"output_tokens":-1`},
		{"a count as a string", `"input_tokens":10`, `"input_tokens":"10"`},
		{"answers not an array", `"answers":[`, `"answers":{"x":[`},
		{"an answer missing (AI SDK, promptfoo)", `{"type":"refusal","name":"named"}`, ``},
		{"an answer too many", `{"type":"refusal","name":"named"}`, `{"type":"refusal","name":"named"},{"type":"refusal","name":"extra"}`},
		{"answers out of order (promptfoo)", `"name":"urgent"`, `"name":"named"`},
		{"a null name (AI SDK)", `"name":"urgent"`, `"name":null`},
		{"a refusal without its name (AI SDK)", `{"type":"refusal","name":"named"}`, `{"type":"refusal","name":null}`},
		{"no name", `"name":"urgent",`, ``},
		{"the wrong type", `"type":"predicate"`, `"type":"score"`},
		{"an unknown type", `"type":"predicate"`, `"type":"boolean"`},
		{"a probability above 1", `"probability":0.5}`, `"probability":1.5}`},
		{"a probability as a string", `"probability":0.5}`, `"probability":"0.5"}`},
		{"a boolean choice (AI SDK zod)", `"choice":"billing"`, `"choice":true`},
		{"a choice not offered (AI SDK, promptfoo)", `"choice":"billing"`, `"choice":"legal"`},
		{"not the highest (AI SDK)", `"choice":"billing"`, `"choice":"sales"`},
		{"no confidence (promptfoo)", `"confidence":0.4,`, ``},
		{"a confidence above 1 (promptfoo)", `"confidence":0.4`, `"confidence":1.4`},
		{"a value missing (AI SDK, promptfoo)", `,{"value":"sales","probability":0.1}`, ``},
		{"a value twice (AI SDK)", `{"value":"sales","probability":0.1}`, `{"value":"billing","probability":0.1}`},
		{"a boolean value (AI SDK zod)", `{"value":"sales"`, `{"value":false`},
		{"a value not offered", `{"value":"sales"`, `{"value":"legal"`},
		{"a sum off by more than 0.01 (promptfoo)", `"probability":0.6}`, `"probability":0.62}`},
		{"a negative probability", `{"value":"sales","probability":0.1}`, `{"value":"sales","probability":-0.1}`},
		{"a score above the levels (AI SDK, promptfoo)", `"score":1.0`, `"score":2.5`},
		{"a score away from the mean (AI SDK, promptfoo)", `"score":1.0`, `"score":1.05`},
		{"a level label changed (promptfoo)", `"label":"Calm"`, `"label":"calm"`},
		{"a level value not an integer (AI SDK zod)", `{"value":0,`, `{"value":0.5,`},
		{"a level value beyond the levels", `{"value":2,`, `{"value":3,`},
		{"a level value negative (AI SDK zod)", `{"value":0,`, `{"value":-1,`},
		{"a key twice", `{"type":"predicate","name":"urgent"`, `{"type":"predicate","type":"predicate","name":"urgent"`},
		{"a field in the wrong case", `"model":"m"`, `"Model":"m"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Replace(goodReply, tc.from, tc.to, 1)
			if body == goodReply {
				t.Fatal("the row changes nothing")
			}
			if _, err := ParseResponse(req, []byte(body)); err == nil {
				t.Fatalf("accepted %s", body)
			}
		})
	}
}

// What the clients tolerate, the client side accepts.
func TestParseResponseTolerates(t *testing.T) {
	req := sampleRequest(t)
	for _, tc := range []struct{ name, from, to string }{
		{"a choice within a hundredth of the top (AI SDK)", `{"value":"billing","probability":0.6},{"value":"technical","probability":0.3}`, `{"value":"billing","probability":0.45},{"value":"technical","probability":0.455}`},
		{"a sum off by 0.01 (promptfoo)", `"probability":0.6}`, `"probability":0.61}`},
		{"probabilities in another order", `{"value":"billing","probability":0.6},{"value":"technical","probability":0.3}`, `{"value":"technical","probability":0.3},{"value":"billing","probability":0.6}`},
		{"a count written 10.0 (Number.isInteger)", `"input_tokens":10,`, `"input_tokens":10.0,`},
		{"a score within the rounding (AI SDK, promptfoo)", `"score":1.0`, `"score":1.02`},
		{"extra fields (zod strips them)", `"model":"m"`, `"model":"m","id":"dec_1","object":"decision"`},
		{"unrounded numbers (vLLM)", `"probability":0.5}`, `"probability":0.5123456789}`},
	} {
		body := strings.Replace(goodReply, tc.from, tc.to, 1)
		if body == goodReply {
			t.Fatalf("%s: the row changes nothing", tc.name)
		}
		if _, err := ParseResponse(req, []byte(body)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// An endpoint that rounds each number to two decimals on its own, five
// summing to 0.98, is read as the AI SDK reads it (within n x 0.005) and
// renormalised; system1's own replies are held to promptfoo's 0.01 too.
func TestRoundedOneByOne(t *testing.T) {
	p := parseOK(t, `{"model":"m","input":"s","questions":[{"type":"choice","name":"c","instructions":"?","choices":[{"value":"a"},{"value":"b"},{"value":"c"},{"value":"d"},{"value":"e"}]}]}`)
	body := []byte(`{"model":"m","answers":[{"type":"choice","name":"c","choice":"a","confidence":0.1,"probabilities":[` +
		`{"value":"a","probability":0.2},{"value":"b","probability":0.2},{"value":"c","probability":0.2},{"value":"d","probability":0.2},{"value":"e","probability":0.18}]}],` +
		`"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2}}`)
	r, err := ParseResponse(p.Request, body)
	if err != nil {
		t.Fatalf("a reply the AI SDK accepts: %v", err)
	}
	if d := r.Dists[0]; math.Abs(d[0]-0.2/0.98) > 1e-12 || math.Abs(d[4]-0.18/0.98) > 1e-12 {
		t.Errorf("distribution %v, want it renormalised", d)
	}
	if CheckResponse(p.Request, body) == nil {
		t.Error("CheckResponse passes a sum off by 0.02, which promptfoo refuses")
	}
	bad := bytes.Replace(body, []byte(`"probability":0.18`), []byte(`"probability":0.1`), 1)
	var ae *AnswerError
	if _, err := ParseResponse(p.Request, bad); !errors.As(err, &ae) || ae.Index != 0 || ae.Question != "c" {
		t.Errorf("a sum off by 0.1: %v, want an AnswerError for question c", err)
	}
}

// A question of many choices that an endpoint answers with no probability
// on any of them passes the AI SDK's sum check (n x 0.005 reaches 1 at
// 200 choices), but gives no distribution: it is a malformed answer to
// that question, never a distribution of zeros passed on.
func TestNoMassIsNoDistribution(t *testing.T) {
	const k = 200
	q := decision.Question{ID: "c", Kind: decision.Choice}
	var probs []string
	for i := range k {
		key := "o" + strconv.Itoa(i)
		q.Options = append(q.Options, decision.Option{Key: key, Name: key})
		probs = append(probs, `{"value":"`+key+`","probability":0}`)
	}
	req := decision.Request{Model: "m", State: []byte(`"s"`), Questions: []decision.Question{q}}
	body := `{"model":"m","answers":[{"type":"choice","name":"c","choice":"o0","confidence":0,"probabilities":[` + strings.Join(probs, ",") + `]}],` +
		`"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":2}}`
	r, err := ParseResponse(req, []byte(body))
	if err == nil {
		t.Fatalf("a reply of %d zeros read as the distribution %v...; want an AnswerError for question c", k, r.Dists[0][:3])
	}
	var ae *AnswerError
	if !errors.As(err, &ae) || ae.Question != "c" {
		t.Fatalf("a reply of %d zeros: %v; want an AnswerError for question c", k, err)
	}
}
