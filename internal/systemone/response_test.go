package systemone

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"system1/internal/decision"
)

func sampleRequest(t *testing.T) decision.Request {
	t.Helper()
	p := ParseRequest([]byte(`{"model":"jev-latest","state":"s","questions":{
		"urgent":{"type":"noul"},
		"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}},
		"mood":{"type":"score","criteria":["Calm",{"x":1},"Very angry"]}}}`))
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatal(ps)
	}
	return p.Request
}

func TestResponseEncodesJevShape(t *testing.T) {
	req := sampleRequest(t)
	dists := []decision.Distribution{{.951, .049}, {.881, .119, 0}, {0, .95, .05}}
	r := Response{Model: "tiny", Questions: req.Questions, Usage: Usage{InputTokens: 318, OutputTokens: 3}, Latency: 42 * time.Millisecond}
	for i, q := range req.Questions {
		a, err := decision.NewAnswer(q, dists[i], 2)
		if err != nil {
			t.Fatal(err)
		}
		r.Answers = append(r.Answers, a)
	}
	got := string(r.AppendJSON(nil))
	want := `{"model":"tiny","answers":{` +
		`"urgent":{"type":"noul","noul":0.95},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.82,"probabilities":{"billing":0.88,"technical":0.12,"sales":0.0}},` +
		`"mood":{"type":"score","score":1.05,"confidence":0.93,"legend":{"0":"Calm","1":{"x":1},"2":"Very angry"},"probabilities":{"0":0.0,"1":0.95,"2":0.05}}},` +
		`"usage":{"input_tokens":318,"output_tokens":3},"latency_ms":42}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	reply, err := ParseResponse(req, []byte(got))
	if err != nil {
		t.Fatalf("our own response fails the clients' checks: %v", err)
	}
	if reply.Answers[1].Choice != "billing" || reply.Usage.InputTokens != 318 || reply.Dists[0][0] != .95 {
		t.Fatalf("reply %+v", reply)
	}
	r.Usage.Estimated = true
	if !strings.Contains(string(r.AppendJSON(nil)), `"usage":{"input_tokens":318,"output_tokens":3,"estimated":true}`) {
		t.Fatal("estimated usage is not flagged")
	}
}

// Each row breaks one rule some real client enforces (wire doc section 6).
func TestParseResponseRejects(t *testing.T) {
	req := sampleRequest(t)
	good := `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.3,"sales":0.1}},` +
		`"mood":{"type":"score","score":1.0,"confidence":0.5,"legend":{"0":"a","1":"b","2":"c"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":1,"output_tokens":1}}`
	if _, err := ParseResponse(req, []byte(good)); err != nil {
		t.Fatalf("the good reply fails: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"not JSON", good, `<html>`},
		{"no model", `"model":"m",`, ``},
		{"model not a string", `"model":"m"`, `"model":1`},
		{"usage as floats (Python SDK strict)", `"input_tokens":1`, `"input_tokens":1.0`},
		{"usage missing", `,"usage":{"input_tokens":1,"output_tokens":1}`, ``},
		{"question missing (JDE checkAnswers)", `"urgent":{"type":"noul","noul":0.5},`, ``},
		{"extra answer id", `"urgent":`, `"bogus":{"type":"noul","noul":0.5},"urgent":`},
		{"type changed", `"type":"noul"`, `"type":"choice"`},
		{"unknown type (JDE)", `"type":"noul"`, `"type":"maybe"`},
		{"noul above 1", `"noul":0.5`, `"noul":1.5`},
		{"noul as a string", `"noul":0.5`, `"noul":"0.5"`},
		{"choice not offered (ultrafast)", `"choice":"billing"`, `"choice":"legal"`},
		{"choice not the argmax (promptfoo)", `"choice":"billing"`, `"choice":"technical"`},
		{"probability keys differ (ultrafast)", `"sales":0.1}`, `"legal":0.1}`},
		{"sum off (promptfoo)", `"billing":0.6`, `"billing":0.61`},
		{"negative probability", `"sales":0.1}`, `"sales":-0.1}`},
		{"confidence missing", `"confidence":0.5,"probabilities":{"billing"`, `"probabilities":{"billing"`},
		{"confidence above 1", `"confidence":0.5,"probabilities":{"billing"`, `"confidence":2,"probabilities":{"billing"`},
		{"score beyond the levels (promptfoo)", `"score":1.0`, `"score":2.5`},
		{"legend short", `"legend":{"0":"a","1":"b","2":"c"}`, `"legend":{"0":"a","1":"b"}`},
		{"answers not an object", `"answers":{`, `"answers":[{`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Replace(good, tc.from, tc.to, 1)
			if body == good {
				t.Fatalf("the row changes nothing")
			}
			if _, err := ParseResponse(req, []byte(body)); err == nil {
				t.Fatalf("accepted %s", body)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{string(AppendError(nil, RateLimit, "slow down")), "slow down"},
		{`{"detail":{"error_type":"authentication_error","message":"Cannot authenticate"}}`, "Cannot authenticate"},
		{`{"detail":"invalid or missing bearer token"}`, "invalid or missing bearer token"},
		{`{"detail":[{"loc":["body","state"],"msg":"Field required","type":"missing"}]}`, "[body state]: Field required"},
		{`upstream exploded`, "upstream exploded"},
		{``, "(empty body)"},
	} {
		if got := ErrorMessage([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.body, got, tc.want)
		}
	}
	if got := ErrorMessage(AppendValidationError(nil, InBody, []decision.Problem{{Path: []string{"model"}, Msg: "Field required", Type: "missing"}})); got != "model: Field required" {
		t.Errorf("422 message %q", got)
	}
}

func TestAppendRequestIsValidJSON(t *testing.T) {
	req := sampleRequest(t)
	b := AppendRequest(nil, req)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
