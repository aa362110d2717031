package systemone

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

func TestParseRequestAcceptsJevBodies(t *testing.T) {
	body := `{"model":"jev-latest","state":{"ticket":"refund please"},"extra":1,
	  "questions":{
	    "dept":{"type":"choice","instructions":"Which team?","passingAnswer":"b",
	            "criteria":{"sales":null,"billing":"money","technical":{"area":"bugs"}}},
	    "urgent":{"type":"noul","instructions":null,"criteria":{"true":"needs action today"}},
	    "plain":{"type":"noul"},
	    "mood":{"type":"score","criteria":["calm",{"level":"upset"},["very","angry"]]},
	    "named":{"type":"score","criteria":{"low":"barely","high":null}},
	    "legacy":{"type":"score","criteria":{"0":"no","1":"yes"}}}}`
	p := ParseRequest([]byte(body))
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatalf("problems: %v", ps)
	}
	if p.Model != "jev-latest" || string(p.State) != `{"ticket":"refund please"}` {
		t.Fatalf("model %q state %s", p.Model, p.State)
	}
	var ids []string
	for _, q := range p.Questions {
		ids = append(ids, q.ID)
	}
	if want := []string{"dept", "urgent", "plain", "mood", "named", "legacy"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("question order %v, want %v", ids, want)
	}
	keys := func(q decision.Question, f func(decision.Option) string) []string {
		var out []string
		for _, o := range q.Options {
			out = append(out, f(o))
		}
		return out
	}
	key := func(o decision.Option) string { return o.Key }
	legend := func(o decision.Option) string { return string(o.Legend) }
	text := func(o decision.Option) string { return string(o.Text) }
	for _, tc := range []struct {
		q    int
		f    func(decision.Option) string
		want []string
	}{
		{0, key, []string{"sales", "billing", "technical"}}, // key order is what the model sees
		{0, text, []string{"", `"money"`, `{"area":"bugs"}`}},
		{1, key, []string{"true", "false"}},
		{1, text, []string{`"needs action today"`, ""}},
		{2, key, []string{"true", "false"}},
		{3, key, []string{"0", "1", "2"}},
		{3, legend, []string{`"calm"`, `{"level":"upset"}`, `["very","angry"]`}},
		{4, legend, []string{`"low"`, `"high"`}},
		{4, text, []string{`"barely"`, ""}},
		{5, legend, []string{`"no"`, `"yes"`}},
	} {
		if got := keys(p.Questions[tc.q], tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("question %s: %v, want %v", p.Questions[tc.q].ID, got, tc.want)
		}
	}
	if string(p.Questions[0].Instructions) != `"Which team?"` || p.Questions[1].Instructions != nil {
		t.Errorf("instructions %s / %s", p.Questions[0].Instructions, p.Questions[1].Instructions)
	}
}

func TestParseRequestAcceptsDocumentForState(t *testing.T) {
	p := ParseRequest([]byte(`{"model":"m","document":"text","questions":{"q":{"type":"noul"}}}`))
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 || string(p.State) != `"text"` {
		t.Fatalf("state %s, problems %v", p.State, ps)
	}
}

func TestParseRequestListsEveryProblem(t *testing.T) {
	lim := decision.DefaultLimits()
	many := map[string]any{}
	for i := 0; i < 21; i++ {
		many[strings.Repeat("o", i+1)] = nil
	}
	manyJSON, _ := json.Marshal(many)
	for _, tc := range []struct {
		name string
		body string
		want []string // "loc type" of each problem, in order
	}{
		{"not JSON", `{"model":`, []string{"body json_invalid"}},
		{"not an object", `[1,2]`, []string{"body model_attributes_type"}},
		{"empty object", `{}`, []string{"model missing", "state missing", "questions missing"}},
		{"wrong top-level types", `{"model":3,"state":true,"questions":[]}`, []string{"model string_type", "state union_type", "questions dict_type"}},
		{"no questions", `{"model":"m","state":"s","questions":{}}`, []string{"questions too_short"}},
		{"question problems, all of them", `{"model":"m","state":"s","questions":{
			"a":{"criteria":{}},
			"b":{"type":"poll"},
			"c":{"type":"choice"},
			"d":{"type":"choice","criteria":["x","y"]},
			"e":{"type":"score","criteria":"high"},
			"f":{"type":"noul","criteria":{"true":"yes","maybe":"?"}},
			"g":{"type":"choice","instructions":7,"criteria":{"x":1,"y":null}},
			"h":{"type":"score","criteria":["only"]},
			"i":{"type":"choice","criteria":{"x":null}},
			"j":"not an object",
			"k":{"type":"choice","criteria":{"x":null,"x":null}}}}`, []string{
			"questions.a.type union_tag_not_found",
			"questions.b.type union_tag_invalid",
			"questions.c.criteria missing",
			"questions.d.criteria dict_type",
			"questions.e.criteria list_type",
			"questions.f.criteria.maybe extra_forbidden",
			"questions.g.instructions union_type",
			"questions.g.criteria.x union_type",
			"questions.j model_type",
			"questions.k.criteria.x duplicate_key",
			"questions.h.criteria too_short",
			"questions.i.criteria too_short",
		}},
		{"a duplicate model", `{"model":"m","state":"s","model":"n","questions":{"q":{"type":"noul"}}}`, []string{"model duplicate_key"}},
		{"a duplicate state", `{"model":"m","state":"s","state":"t","questions":{"q":{"type":"noul"}}}`, []string{"state duplicate_key"}},
		{"a duplicate type in a question", `{"model":"m","state":"s","questions":{"q1":{"type":"noul","type":"choice"}}}`, []string{"questions.q1.type duplicate_key"}},
		{"a duplicate side of a noul", `{"model":"m","state":"s","questions":{"q":{"type":"noul","criteria":{"true":"a","true":"b"}}}}`, []string{"questions.q.criteria.true duplicate_key"}},
		{"a duplicate level of a score", `{"model":"m","state":"s","questions":{"s":{"type":"score","criteria":{"low":"a","low":"b"}}}}`, []string{"questions.s.criteria.low duplicate_key"}},
		{"an empty question id", `{"model":"m","state":"s","questions":{"":{"type":"noul"},"q":{"type":"noul"}}}`, []string{"questions. value_error"}},
		{"a duplicate question id", `{"model":"m","state":"s","questions":{"q":{"type":"noul"},"q":{"type":"noul"}}}`, []string{"questions.q duplicate_key"}},
		{"an id that is not UTF-8", "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"q\xff\":{\"type\":\"noul\"}}}", []string{"questions string_unicode"}},
		{"an id with a lone surrogate", `{"model":"m","state":"s","questions":{"q\ud800":{"type":"noul"}}}`, []string{"questions string_unicode"}},
		{"a state that is not UTF-8", "{\"model\":\"m\",\"state\":\"caf\xe9\",\"questions\":{\"q\":{\"type\":\"noul\"}}}", []string{"state string_unicode"}},
		{"deep in the state", "{\"model\":\"m\",\"state\":{\"a\":[\"ok\",{\"b\":\"\xc3\"}]},\"questions\":{\"q\":{\"type\":\"noul\"}}}", []string{"state.a.1.b string_unicode"}},
		{"an option that is not UTF-8", "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"q\":{\"type\":\"choice\",\"criteria\":{\"a\":null,\"b\x80\":null}}}}", []string{"questions.q.criteria string_unicode"}},
		{"a model that is not UTF-8", "{\"model\":\"m\xff\",\"state\":\"s\",\"questions\":{\"q\":{\"type\":\"noul\"}}}", []string{"model string_unicode"}},
		{"over the label capacity", `{"model":"m","state":"s","questions":{"big":{"type":"choice","criteria":` + string(manyJSON) + `}}}`,
			[]string{"questions.big.criteria too_long"}},
		{"too many levels", `{"model":"m","state":"s","questions":{"s":{"type":"score","criteria":[1,2,3,4,5,6,7,8,9,10,11]}}}`,
			[]string{"questions.s.criteria list_type"}},
		{"too many score levels", `{"model":"m","state":"s","questions":{"s":{"type":"score","criteria":["a","b","c","d","e","f","g","h","i","j","k"]}}}`,
			[]string{"questions.s.criteria too_long"}},
		{"state too large", `{"model":"m","state":"` + strings.Repeat("x", lim.MaxStateBytes) + `","questions":{"q":{"type":"noul"}}}`,
			[]string{"state too_long"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range ParseRequest([]byte(tc.body)).Validate(lim) {
				loc := strings.Join(p.Path, ".")
				if loc == "" {
					loc = "body"
				}
				got = append(got, loc+" "+p.Type)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestValidationErrorBodyHasBothShapes(t *testing.T) {
	p := ParseRequest([]byte(`{"model":"m","state":"s","questions":{"q":{"type":"choice"},"r":{"type":"poll"}}}`))
	b := AppendValidationError(nil, InBody, p.Validate(decision.DefaultLimits()))
	var body struct {
		Error struct {
			Message, Type string
			Param         *string
		}
		Detail []struct {
			Loc       []string
			Msg, Type string
		}
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if body.Error.Type != "invalid_request_error" || body.Error.Param == nil || *body.Error.Param != "questions.q.criteria" {
		t.Errorf("error %+v", body.Error)
	}
	if !strings.Contains(body.Error.Message, "questions.q.criteria") || !strings.Contains(body.Error.Message, "questions.r.type") {
		t.Errorf("message does not name every field: %q", body.Error.Message)
	}
	if len(body.Detail) != 2 || !reflect.DeepEqual(body.Detail[0].Loc, []string{"body", "questions", "q", "criteria"}) || body.Detail[1].Type != "union_tag_invalid" {
		t.Errorf("detail %+v", body.Detail)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","state":"s","questions":{"q":{"type":"choice","criteria":{"a":null,"b":"x"}}}}`,
		`{"model":"m","state":{"a":[1,2]},"questions":{"q":{"type":"score","criteria":["lo","hi"]},"n":{"type":"noul","criteria":{"true":"t"}}}}`,
		`{"model":"m","document":["x"],"questions":{"q":{"type":"score","criteria":{"0":"a","1":"b"}}}}`,
		`{"model":"m","state":"s","questions":{"q":{"type":"choice","criteria":{"a":null,"a":null}}}}`,
		`[]`, `{`, `{"questions":{"q":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := ParseRequest(body)
		ps := p.Validate(decision.DefaultLimits())
		for _, pr := range ps {
			if pr.Msg == "" || pr.Type == "" {
				t.Fatalf("problem without a message or type: %+v", pr)
			}
		}
		b := AppendValidationError(nil, InBody, ps)
		if !json.Valid(b) {
			t.Fatalf("422 body is not JSON: %s", b)
		}
		if len(ps) > 0 {
			return
		}
		// An accepted request is read as sent: every id, option and model
		// valid UTF-8, never a U+FFFD that decoding made up.
		if _, _, bad := jsonx.InvalidText(body); bad || !utf8.ValidString(p.Model) {
			t.Fatalf("accepted text that is not UTF-8: %q", body)
		}
		for _, q := range p.Questions {
			if !utf8.ValidString(q.ID) || (strings.ContainsRune(q.ID, utf8.RuneError) && !bytes.Contains(body, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`))) {
				t.Fatalf("id %q was changed in reading %q", q.ID, body)
			}
		}
		// A valid request survives a round trip through the client's encoder.
		again := ParseRequest(AppendRequest(nil, p.Request))
		if ps := again.Validate(decision.DefaultLimits()); len(ps) > 0 {
			t.Fatalf("re-encoded request has problems %v:\n%s", ps, AppendRequest(nil, p.Request))
		}
		if !reflect.DeepEqual(summary(again.Request), summary(p.Request)) {
			t.Fatalf("round trip changed the request:\n%v\n%v", summary(p.Request), summary(again.Request))
		}
	})
}

// summary is what the model sees of a request, for round-trip checks.
func summary(r decision.Request) []string {
	out := []string{r.Model, compact(r.State)}
	for _, q := range r.Questions {
		out = append(out, q.ID, string(q.Kind), compact(q.Instructions))
		for _, o := range q.Options {
			name, text := o.Name, o.Text
			if q.Kind == decision.Score {
				// Jev takes levels as an array: a named level goes as its
				// entry, which names it (appendLevel).
				name, text = "", appendLevel(nil, o)
			}
			out = append(out, o.Key, name, compact(text))
		}
	}
	return out
}

func compact(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Jev 1.14's image fields are named in one order, assets then images,
// whichever the request gives first, as Unsupported.Features says.
func TestImageFieldsInAFixedOrder(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","state":"s","assets":{"p":{"type":"image"}},"images":["aGk="],"questions":{"q":{"type":"noul"}}}`,
		`{"model":"m","state":"s","images":["aGk="],"assets":{"p":{"type":"image"}},"questions":{"q":{"type":"noul"}}}`,
	} {
		if got := ParseRequest([]byte(body)).Images.Features(); !slices.Equal(got, []string{FeatureAssets, FeatureImages}) {
			t.Errorf("%s: features %q", body, got)
		}
	}
}
