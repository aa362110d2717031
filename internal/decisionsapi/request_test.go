package decisionsapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/jsonx"
	"system1/internal/systemone"
)

func parseOK(t *testing.T, body string) *Parsed {
	t.Helper()
	p := ParseRequest([]byte(body))
	if e := p.Validate(decision.DefaultLimits()); e != nil {
		t.Fatalf("%s\n%s", body, e.AppendJSON(nil))
	}
	return p
}

func TestParseRequestReadsEveryQuestionType(t *testing.T) {
	p := parseOK(t, `{"model":"gpt-6-luna","input":"I was charged twice.",
	  "prompt_cache_key":"tenant-42","prompt_cache_options":{"mode":"explicit","ttl":"30m"},"safety_identifier":"user-123",
	  "questions":[
	    {"type":"predicate","name":"refund","instructions":"Is the customer asking for money back?"},
	    {"type":"choice","name":"dept","instructions":[{"type":"input_text","text":"Which team?"}],
	     "choices":[{"value":"billing","description":"Charges and refunds"},{"value":"support"}]},
	    {"type":"score","instructions":null,"levels":[{"label":"Routine"},{"label":"Blocked","description":"cannot work"}]},
	    {"type":"choice","choices":[{"value":true},{"value":"true","description":"the word"},{"value":false}]}]}`)
	if p.Model != "gpt-6-luna" || string(p.State) != `"I was charged twice."` {
		t.Fatalf("model %q state %s", p.Model, p.State)
	}
	type opt struct{ Key, Name, Text, Legend string }
	opts := func(q decision.Question) []opt {
		var out []opt
		for _, o := range q.Options {
			out = append(out, opt{o.Key, o.Name, string(o.Text), string(o.Legend)})
		}
		return out
	}
	for _, tc := range []struct {
		i     int
		id    string
		kind  decision.Kind
		instr string
		opts  []opt
		asked Asked
	}{
		{0, "refund", decision.Noul, `"Is the customer asking for money back?"`,
			[]opt{{"true", "true", "", ""}, {"false", "false", "", ""}}, Asked{Name: "refund", Named: true}},
		{1, "dept", decision.Choice, `"Which team?"`,
			[]opt{{"billing", "billing", `"Charges and refunds"`, ""}, {"support", "support", "", ""}},
			Asked{Name: "dept", Named: true, Values: []json.RawMessage{json.RawMessage(`"billing"`), json.RawMessage(`"support"`)}}},
		{2, "questions[2]", decision.Score, ``,
			[]opt{{"0", "", `"Routine"`, `"Routine"`}, {"1", "Blocked", `"cannot work"`, `{"label":"Blocked","description":"cannot work"}`}},
			Asked{Labels: []string{"Routine", "Blocked"}}},
		// true and "true" are distinct choices, to the model too.
		{3, "questions[3]", decision.Choice, ``,
			[]opt{{"true (boolean)", "true (boolean)", "", ""}, {"true", "true", `"the word"`, ""}, {"false", "false", "", ""}},
			Asked{Values: []json.RawMessage{json.RawMessage(`true`), json.RawMessage(`"true"`), json.RawMessage(`false`)}}},
	} {
		q := p.Questions[tc.i]
		if q.ID != tc.id || q.Kind != tc.kind || string(q.Instructions) != tc.instr {
			t.Errorf("question %d: id %q kind %s instructions %s", tc.i, q.ID, q.Kind, q.Instructions)
		}
		if got := opts(q); !reflect.DeepEqual(got, tc.opts) {
			t.Errorf("question %d options\n%+v\nwant\n%+v", tc.i, got, tc.opts)
		}
		if !reflect.DeepEqual(p.Asked[tc.i], tc.asked) {
			t.Errorf("question %d asked %+v, want %+v", tc.i, p.Asked[tc.i], tc.asked)
		}
	}
}

// The state each form of input reads as (docs/decisions-wire.md, "Reading
// the input").
func TestInputState(t *testing.T) {
	for _, tc := range []struct{ name, input, state string }{
		{"a string is the text state", `"refund please"`, `"refund please"`},
		{"one user message", `[{"role":"user","content":"refund please"}]`, `"refund please"`},
		{"the AI SDK's text state", `[{"role":"user","content":[{"type":"input_text","text":"refund please"}]}]`, `"refund please"`},
		{"the AI SDK's JSON state, as sent", `[{"role":"user","content":[{"type":"input_json","data":{"ticket": "refund", "n":[1,2]}}]}]`, `{"ticket": "refund", "n":[1,2]}`},
		{"an array of objects", `[{"type":"message","role":"user","content":[{"type":"input_json","data":[{"a":1},{"b":2}]}]}]`, `[{"a":1},{"b":2}]`},
		{"text parts and messages join with a blank line", `[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},{"role":"user","content":"c"}]`, `"a\n\nb\n\nc"`},
		{"the tool runner's task and observation", `[{"role":"user","content":"task"},{"role":"user","content":[{"type":"input_text","text":"seen"}]}]`, `"task\n\nseen"`},
		{"text and JSON mixed", `[{"role":"user","content":[{"type":"input_text","text":"ticket:"},{"type":"input_json","data":{"id":7}}]}]`, `["ticket:",{"id":7}]`},
		{"other roles keep their role", `[{"role":"developer","content":"be strict"},{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"output_text","text":"hello"},{"type":"refusal","refusal":"no"}],"phase":"final_answer"}]`,
			`[{"role":"developer","content":"be strict"},{"role":"user","content":"hi"},{"role":"assistant","content":["hello",{"refusal":"no"}]}]`},
		{"tool calls and outputs", `[{"role":"user","content":"x<y & z"},{"type":"function_call","call_id":"c1","name":"lookup","arguments":"{\"id\":7}","id":"fc_1","status":"completed"},{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"found"}]},{"type":"custom_tool_call","call_id":"c2","name":"sh","namespace":"tools","input":"ls"},{"type":"custom_tool_call_output","call_id":"c2","output":"a.txt"}]`,
			`[{"role":"user","content":"x<y & z"},{"type":"function_call","call_id":"c1","name":"lookup","arguments":"{\"id\":7}"},{"type":"function_call_output","call_id":"c1","output":"found"},{"type":"custom_tool_call","call_id":"c2","name":"sh","namespace":"tools","input":"ls"},{"type":"custom_tool_call_output","call_id":"c2","output":"a.txt"}]`},
		{"an empty message", `[{"role":"user","content":[]}]`, `""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parseOK(t, `{"model":"m","input":`+tc.input+`,"questions":[{"type":"predicate","instructions":"?"}]}`)
			if string(p.State) != tc.state {
				t.Fatalf("state\n%s\nwant\n%s", p.State, tc.state)
			}
		})
	}
}

func TestInstructionsRead(t *testing.T) {
	for _, tc := range []struct{ instructions, want string }{
		{`"plain"`, `"plain"`},
		{`null`, ``},
		{`[]`, ``},
		{`[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]`, `"a\n\nb"`},
		{`[{"type":"input_json","data":{"rubric":[1,2]}}]`, `{"rubric":[1,2]}`},
		{`[{"type":"input_text","text":"use"},{"type":"input_json","data":{"r":1}}]`, `["use",{"r":1}]`},
	} {
		p := parseOK(t, `{"model":"m","input":"s","questions":[{"type":"predicate","instructions":`+tc.instructions+`}]}`)
		if got := string(p.Questions[0].Instructions); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.instructions, got, tc.want)
		}
	}
	// Missing instructions are none, as the AI SDK omits them.
	if p := parseOK(t, `{"model":"m","input":"s","questions":[{"type":"choice","choices":[{"value":"a"},{"value":"b"}]}]}`); p.Questions[0].Instructions != nil {
		t.Errorf("missing instructions read as %s", p.Questions[0].Instructions)
	}
}

// Each row names every problem of its body, by param, in the order
// reported; "!" marks input the server cannot read.
func TestParseRequestProblems(t *testing.T) {
	q := `"questions":[{"type":"predicate","instructions":"?"}]`
	choices := func(n int) string {
		cs := make([]string, n)
		for i := range cs {
			cs[i] = fmt.Sprintf(`{"value":"c%d"}`, i)
		}
		return "[" + strings.Join(cs, ",") + "]"
	}
	many := func(n int) string {
		return `"questions":[` + strings.Repeat(`{"type":"predicate","instructions":"?"},`, n-1) + `{"type":"predicate","instructions":"?"}]`
	}
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{"not JSON", `{"model":`, []string{""}},
		{"not an object", `[1]`, []string{""}},
		{"empty", `{}`, []string{"model", "input", "questions"}},
		{"an unknown field", `{"model":"m","input":"s",` + q + `,"temperature":0}`, []string{"temperature"}},
		{"an unknown field with an odd name", `{"model":"m","input":"s",` + q + `,"a.b":0}`, []string{`["a.b"]`}},
		{"wrong top-level types", `{"model":1,"input":2,"questions":{}}`, []string{"model", "input", "questions"}},
		{"an empty model", `{"model":"","input":"s",` + q + `}`, []string{"model"}},
		{"no questions", `{"model":"m","input":"s","questions":[]}`, []string{"questions"}},
		{"no input items", `{"model":"m","input":[],` + q + `}`, []string{"input"}},
		{"a duplicate key", `{"model":"m","model":"n","input":"s",` + q + `}`, []string{"model"}},
		{"a duplicate key in a question", `{"model":"m","input":"s","questions":[{"type":"predicate","type":"score"}]}`, []string{"questions[0].type"}},
		{"a duplicate key deep in input_json", `{"model":"m","input":[{"role":"user","content":[{"type":"input_json","data":{"a":{"b":1,"b":2}}}]}],` + q + `}`, []string{"input[0].content[0].data"}},
		{"a string that is not UTF-8", "{\"model\":\"m\",\"input\":\"s\",\"questions\":[{\"type\":\"choice\",\"choices\":[{\"value\":\"a\"},{\"value\":\"b\xff\"}]}]}", []string{"questions[0].choices[1].value"}},
		{"a lone surrogate", `{"model":"m","input":"s","questions":[{"type":"predicate","name":"x\ud800"}]}`, []string{"questions[0].name"}},
		{"a key that is not UTF-8", "{\"model\":\"m\",\"input\":{\"k\xff\":1},\"questions\":[]}", []string{"input"}},
		{"every question problem at once", `{"model":"m","input":"s","questions":[
			{"instructions":"?"},
			{"type":"boolean"},
			{"type":"choice","choices":[{"value":"a"},{"value":"a"},{"value":1},{"value":"b","extra":1},{"label":"x"},{"value":"c","description":7},{"value":""}]},
			{"type":"score","levels":[{"label":"lo"},{"description":"no label"},{"label":2}]},
			{"type":"predicate","instructions":7},
			{"type":"predicate","choices":[]},
			{"type":"choice"},
			{"type":"score","levels":"high"},
			"not an object",
			{"type":"predicate","name":"n"},
			{"type":"predicate","name":"n"},
			{"type":"predicate","name":7}]}`, []string{
			"questions[0].type",
			"questions[1].type",
			"questions[2].choices[1].value",
			"questions[2].choices[2].value",
			"questions[2].choices[3].extra",
			"questions[2].choices[4].label",
			"questions[2].choices[5].description",
			"questions[2].choices[6].value",
			"questions[3].levels[1].label",
			"questions[3].levels[2].label",
			"questions[4].instructions",
			"questions[5].choices",
			"questions[6].choices",
			"questions[7].levels",
			"questions[8]",
			"questions[10].name",
			"questions[11].name",
		}},
		{"images anywhere", `{"model":"m","input":[
			{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"high"}]},
			{"type":"function_call","call_id":"c","name":"shot","arguments":"{}"},
			{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x/y.png"}]}],
			"questions":[{"type":"predicate","instructions":[{"type":"input_text","text":"Is it red?"},{"type":"input_image","image_url":"https://x/z.png"}]}]}`,
			[]string{"!input[0].content[1]", "!input[2].output[0]", "!questions[0].instructions[1]"}},
		{"an image beside a contract problem", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}],"questions":[{"type":"poll"}]}`,
			[]string{"!input[0].content[0]", "questions[0].type"}},
		{"input items", `{"model":"m","input":[
			{"content":"no role"},
			{"role":"robot","content":"x"},
			{"role":"developer","content":[{"type":"input_json","data":{}}]},
			{"role":"user","content":[{"type":"output_text","text":"x"}]},
			{"role":"user","content":7},
			{"role":"user"},
			{"role":"assistant","content":"x","phase":"later"},
			{"role":"user","type":"function_call","content":"x"},
			{"type":"function_call_output","call_id":"nobody","output":"x"},
			{"type":"function_call","call_id":"c","name":"f"},
			{"type":"function_call","call_id":"c","name":"f","arguments":"{}","status":"done"},
			{"type":"reasoning","summary":[]},
			{"role":"user","content":[{"type":"input_text","text":"x","prompt_cache_breakpoint":{"mode":"implicit"}}]},
			{"role":"user","content":[{"type":"input_json","data":"text"}]},
			{"role":"user","content":[{"type":"input_json","data":[{"a":1},2]}]},
			{"role":"user","content":[{"type":"input_text","text":"x","cache":true}]}],` + q + `}`, []string{
			"input[0]",
			"input[1].role",
			"input[2].content[0].type",
			"input[3].content[0].type",
			"input[4].content",
			"input[5].content",
			"input[6].phase",
			"input[7].type",
			"input[8].call_id",
			"input[9].arguments",
			"input[10].status",
			"input[10].call_id",
			"input[11].type",
			"input[12].content[0].prompt_cache_breakpoint.mode",
			"input[13].content[0].data",
			"input[14].content[0].data",
			"input[15].content[0].cache",
		}},
		{"input_json over its limits", `{"model":"m","input":[
			{"role":"user","content":[{"type":"input_json","data":` + strings.Repeat(`{"a":`, 33) + `1` + strings.Repeat(`}`, 33) + `}]},
			{"role":"user","content":[{"type":"input_json","data":{"a":[` + strings.Repeat(`0,`, MaxJSONValues) + `0]}}]},
			{"role":"user","content":[{"type":"input_json","data":{"a":"` + strings.Repeat("x", MaxJSONBytes) + `"}}]}],` + q + `}`,
			[]string{"input[0].content[0].data", "input[1].content[0].data", "input[2].content[0].data"}},
		{"the ignored fields are still typed", `{"model":"m","input":"s",` + q + `,"prompt_cache_key":1,"prompt_cache_options":{"mode":"auto","ttl":"1h","x":1},"safety_identifier":"` + strings.Repeat("é", MaxSafetyIdentifier+1) + `"}`,
			[]string{"prompt_cache_key", "prompt_cache_options.x", "prompt_cache_options.mode", "prompt_cache_options.ttl", "safety_identifier"}},
		{"null for the optional fields", `{"model":"m","input":"s",` + q + `,"prompt_cache_key":null,"prompt_cache_options":null,"safety_identifier":null}`, nil},
		{"limits: too many questions for the wire", `{"model":"m","input":"s",` + many(MaxQuestions+1) + `}`, []string{"questions"}},
		{"limits: the most questions", `{"model":"m","input":"s",` + many(MaxQuestions) + `}`, nil},
		{"limits: one choice", `{"model":"m","input":"s","questions":[{"type":"choice","choices":[{"value":"a"}]}]}`, []string{"questions[0].choices"}},
		{"limits: over the label capacity", `{"model":"m","input":"s","questions":[{"type":"choice","choices":` + choices(21) + `}]}`, []string{"questions[0].choices"}},
		{"limits: one level", `{"model":"m","input":"s","questions":[{"type":"score","levels":[{"label":"a"}]}]}`, []string{"questions[0].levels"}},
		{"limits: a long description", `{"model":"m","input":"s","questions":[{"type":"choice","choices":[{"value":"a","description":"` + strings.Repeat("x", 5000) + `"},{"value":"b"}]}]}`, []string{"questions[0].choices[0]"}},
		{"limits: long instructions", `{"model":"m","input":"s","questions":[{"type":"predicate","instructions":"` + strings.Repeat("x", 17<<10) + `"}]}`, []string{"questions[0].instructions"}},
		{"limits: a long input", `{"model":"m","input":"` + strings.Repeat("x", 257<<10) + `",` + q + `}`, []string{"input"}},
		{"unnamed questions and names that look like their ids", `{"model":"m","input":"s","questions":[{"type":"predicate","instructions":"?"},{"type":"predicate","name":"questions[0]"}]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ParseRequest([]byte(tc.body)).Validate(decision.DefaultLimits())
			var got []string
			if e != nil {
				for _, pr := range e.Problems {
					if pr.Message == "" {
						t.Errorf("problem at %q without a message", pr.Param)
					}
					s := pr.Param
					if pr.Unsupported {
						s = "!" + s
					}
					got = append(got, s)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				msg := ""
				if e != nil {
					msg = e.Message
				}
				t.Fatalf("problems\n%s\nwant\n%s\n(%s)", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), msg)
			}
		})
	}
}

// A lower limit of the server wins over the wire's, and the message says
// which applies.
func TestStricterLimitWins(t *testing.T) {
	body := func(n int) []byte {
		return []byte(`{"model":"m","input":"s","questions":[` + strings.Repeat(`{"type":"predicate","instructions":"?"},`, n-1) + `{"type":"predicate","instructions":"?"}]}`)
	}
	lim := decision.DefaultLimits()
	lim.MaxQuestions = 64
	e := ParseRequest(body(65)).Validate(lim)
	if e == nil || e.Param != "questions" || !strings.Contains(e.Message, "at most 64") {
		t.Fatalf("65 questions with a server max of 64: %v", e)
	}
	lim.MaxQuestions = 1000 // above the wire's 400
	if e := ParseRequest(body(401)).Validate(lim); e == nil || !strings.Contains(e.Message, "at most 400") {
		t.Fatalf("401 questions: %v", e)
	}
	lim.MaxChoiceOptions = 1000
	cs := make([]string, 256)
	for i := range cs {
		cs[i] = fmt.Sprintf(`{"value":"c%d"}`, i)
	}
	b := []byte(`{"model":"m","input":"s","questions":[{"type":"choice","choices":[` + strings.Join(cs, ",") + `]}]}`)
	if e := ParseRequest(b).Validate(lim); e == nil || e.Param != "questions[0].choices" || !strings.Contains(e.Message, "capacity of 255") {
		t.Fatalf("256 choices: %v", e)
	}
}

func TestErrorEnvelopes(t *testing.T) {
	for _, tc := range []struct {
		e                  *Error
		status             int
		typ, code, param   string
		retryS, retryMs    string
		messageMustContain string
	}{
		{InvalidParam("questions[3].choices[1].value", "duplicate"), 400, TypeInvalidRequest, "", "questions[3].choices[1].value", "", "", "questions[3].choices[1].value: duplicate"},
		{Invalid([]Problem{{Param: "input[0].content[1]", Message: "no images", Unsupported: true}}), 400, TypeInvalidRequest, CodeUnsupportedInput, "input[0].content[1]", "", "", "no images"},
		{Invalid([]Problem{{Param: "", Message: "the body is not valid JSON"}}), 400, TypeInvalidRequest, "", "", "", "", "not valid JSON"},
		{Unauthorized("bad key"), 401, TypeInvalidRequest, CodeInvalidAPIKey, "", "", "", "bad key"},
		{ModelNotFound("gpt-5.6-luna"), 404, TypeInvalidRequest, CodeModelNotFound, "model", "", "", `"gpt-5.6-luna"`},
		{ContextLengthExceeded("too long"), 400, TypeInvalidRequest, CodeContextLengthExceeded, "input", "", "", "too long"},
		{NotServed("the engine cannot serve decisions"), 400, TypeInvalidRequest, "", "model", "", "", "cannot serve"},
		{TooManyRequests("slow down", 1500*time.Millisecond), 429, TypeRateLimit, CodeRateLimitExceeded, "", "2", "1500", "slow down"},
		{ServiceUnavailable("no node", 3*time.Second), 503, TypeServer, "", "", "3", "3000", "no node"},
		{ServiceUnavailable("no node", 0), 503, TypeServer, "", "", "", "", "no node"},
		// The longest pause a node can ask (retryafter holds a longer one
		// there): whole seconds rounded up without overflowing.
		{ServiceUnavailable("no node", math.MaxInt64), 503, TypeServer, "", "", "9223372037", "9223372036854", "no node"},
		{Internal("bug"), 500, TypeServer, "", "", "", "", "bug"},
	} {
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		b := tc.e.AppendJSON(nil)
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		ms, _ := jsonx.Members(b)
		inner, _ := jsonx.Lookup(ms, "error")
		fields, _ := jsonx.Members(inner)
		if len(ms) != 1 || len(fields) != 4 {
			t.Errorf("%s: not exactly {error: {message, type, param, code}}", b)
		}
		deref := func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		}
		if tc.e.Status != tc.status || env.Error.Type != tc.typ || deref(env.Error.Code) != tc.code || deref(env.Error.Param) != tc.param ||
			!strings.Contains(env.Error.Message, tc.messageMustContain) {
			t.Errorf("status %d body %s", tc.e.Status, b)
		}
		if (env.Error.Code != nil && *env.Error.Code == "") || (env.Error.Param != nil && *env.Error.Param == "") {
			t.Errorf("%s: an empty code or param is written as \"\", not null", b)
		}
		h := http.Header{}
		tc.e.SetHeaders(h)
		if h.Get("Retry-After") != tc.retryS || h.Get("Retry-After-Ms") != tc.retryMs {
			t.Errorf("%d: retry headers %v", tc.status, h)
		}
		if tc.status >= 500 && tc.status != 503 && tc.e.RetryAfter > 0 {
			t.Errorf("a %d asks for a pause", tc.status)
		}
	}
}

// The same request on the Jev wire and on this one reads into the same
// domain request, so that both faces give the same answers for the same
// read.
func TestSameRequestAsJev(t *testing.T) {
	jev := systemone.ParseRequest([]byte(`{"model":"m","state":"I was charged twice.","questions":{
		"refund":{"type":"noul","instructions":"Is the customer asking for money back?"},
		"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":"Charges and refunds","support":null}},
		"severity":{"type":"score","instructions":"How bad?","criteria":["Routine","Degraded","Blocked"]},
		"ticket":{"type":"noul"}}}`))
	if ps := jev.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatal(ps)
	}
	for _, input := range []string{
		`"I was charged twice."`,
		`[{"role":"user","content":"I was charged twice."}]`,
		`[{"role":"user","content":[{"type":"input_text","text":"I was charged twice."}]}]`,
	} {
		dec := parseOK(t, `{"model":"m","input":`+input+`,"questions":[
			{"type":"predicate","name":"refund","instructions":"Is the customer asking for money back?"},
			{"type":"choice","name":"dept","instructions":"Which team?","choices":[{"value":"billing","description":"Charges and refunds"},{"value":"support"}]},
			{"type":"score","name":"severity","instructions":[{"type":"input_text","text":"How bad?"}],"levels":[{"label":"Routine"},{"label":"Degraded"},{"label":"Blocked"}]},
			{"type":"predicate","name":"ticket"}]}`)
		if got, want := summary(dec.Request), summary(jev.Request); !reflect.DeepEqual(got, want) {
			t.Fatalf("input %s reads as\n%q\nJev's as\n%q", input, got, want)
		}
		// The answers are then the domain's: the same numbers on both wires.
		for i, q := range dec.Questions {
			d := decision.Distribution{.62, .38}
			if len(q.Options) == 3 {
				d = decision.Distribution{.1, .62, .28}
			}
			a, _ := decision.NewAnswer(q, d, Places)
			b, _ := decision.NewAnswer(jev.Questions[i], d, 2)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("question %s: %+v on this wire, %+v on Jev's", q.ID, a, b)
			}
		}
	}
}

// summary is what the model sees of a request, and what identifies its
// options, for comparisons.
func summary(r decision.Request) []string {
	out := []string{r.Model, jsonx.Text(r.State)}
	for _, q := range r.Questions {
		out = append(out, q.ID, string(q.Kind), jsonx.Text(q.Instructions))
		for _, o := range q.Options {
			out = append(out, o.Key, o.Name, jsonx.Text(o.Text))
		}
	}
	return out
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"s","questions":[{"type":"choice","name":"q","instructions":"?","choices":[{"value":"a"},{"value":true,"description":"x"}]}]}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_json","data":{"a":[1,2]}}]}],"questions":[{"type":"score","levels":[{"label":"lo"},{"label":"hi","description":"d"}]},{"type":"predicate","instructions":[{"type":"input_text","text":"t"}]}]}`,
		`{"model":"m","input":[{"role":"developer","content":"d"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}],"questions":[{"type":"predicate","name":"questions[1]"},{"type":"predicate"}]}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}],"questions":[]}`,
		`[]`, `{`, `{"questions":[{"type":"choice","choices":[{"value":"true"},{"value":true}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := ParseRequest(body)
		e := p.Validate(decision.DefaultLimits())
		if e != nil {
			if e.Status != 400 || e.Type != TypeInvalidRequest || len(e.Problems) == 0 || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
			if !json.Valid(e.AppendJSON(nil)) {
				t.Fatalf("error body is not JSON: %s", e.AppendJSON(nil))
			}
			return
		}
		// An accepted request has one answerable question per asked one,
		// unique ids, and typed values for every choice.
		ids := map[string]bool{}
		for i, q := range p.Questions {
			if ids[q.ID] || !q.Kind.Valid() {
				t.Fatalf("question %d: id %q kind %q", i, q.ID, q.Kind)
			}
			ids[q.ID] = true
			if a := p.Asked[i]; a.Named && a.Name != q.ID {
				t.Fatalf("question %d named %q has id %q", i, a.Name, q.ID)
			}
			if q.Kind == decision.Choice && len(p.Asked[i].Values) != len(q.Options) {
				t.Fatalf("question %d: %d values for %d options", i, len(p.Asked[i].Values), len(q.Options))
			}
		}
		// The client's request for it reads back as the same request.
		again := ParseRequest(AppendRequest(nil, p.Request))
		if e := again.Validate(decision.DefaultLimits()); e != nil {
			t.Fatalf("re-encoded request fails: %v\n%s", e, AppendRequest(nil, p.Request))
		}
		if got, want := summary(again.Request), summary(p.Request); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip changed the request:\n%q\n%q", want, got)
		}
	})
}
