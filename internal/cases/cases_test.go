package cases

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/decision"
)

const agnews = `{"id": "a1", "set": "agnews-dev", "state": "Stocks fell.", "questions": {"topic": {"type": "choice", "instructions": "What is the topic?", "criteria": {"world": "world", "sports": "sports", "business": "business", "scitech": "science"}}}, "expected": {"topic": "business"}}`

func TestParseLineKinds(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		set        string
		kinds      []decision.Kind
		options    []int
		expected   []int
	}{
		{"choice", agnews, "agnews-dev", []decision.Kind{decision.Choice}, []int{4}, []int{2}},
		{"noul true", `{"id":"s","set":"sst2","state":"fine","questions":{"positive":{"type":"noul","instructions":"Positive?","criteria":{"true":"likes","false":"dislikes"}}},"expected":{"positive":true}}`,
			"sst2", []decision.Kind{decision.Noul}, []int{2}, []int{0}},
		{"noul false, no criteria", `{"id":"s","set":"sst2","state":"bad","questions":{"positive":{"type":"noul"}},"expected":{"positive":false}}`,
			"sst2", []decision.Kind{decision.Noul}, []int{2}, []int{1}},
		{"score array", `{"id":"s5","set":"sst5","state":"meh","questions":{"sentiment":{"type":"score","criteria":["very negative","negative","neutral","positive","very positive"]}},"expected":{"sentiment":2}}`,
			"sst5", []decision.Kind{decision.Score}, []int{5}, []int{2}},
		{"score named levels, 3.0 is level 3", `{"id":"s","state":{"a":1},"questions":{"q":{"type":"score","criteria":{"low":"l","mid":"m","high":"h","max":"x"}}},"expected":{"q":3.0}}`,
			"file-set", []decision.Kind{decision.Score}, []int{4}, []int{3}},
		{"two questions, expected in another order, document for state", `{"id":"m","set":"x","document":"d","questions":{"a":{"type":"choice","criteria":{"x":null,"y":null}},"b":{"type":"noul"}},"expected":{"b":false,"a":"y"}}`,
			"x", []decision.Kind{decision.Choice, decision.Noul}, []int{2, 2}, []int{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseLine([]byte(tc.line), "file-set")
			if err != nil {
				t.Fatal(err)
			}
			if c.Set != tc.set {
				t.Errorf("set %q, want %q", c.Set, tc.set)
			}
			if c.Request.Model != "" {
				t.Errorf("model %q; the bench sets it", c.Request.Model)
			}
			if len(c.Request.Questions) != len(tc.kinds) {
				t.Fatalf("%d questions", len(c.Request.Questions))
			}
			for i, q := range c.Request.Questions {
				if q.Kind != tc.kinds[i] || len(q.Options) != tc.options[i] || c.Expected[i] != tc.expected[i] {
					t.Errorf("question %d: %s over %d options, expected %d; want %s over %d, expected %d",
						i, q.Kind, len(q.Options), c.Expected[i], tc.kinds[i], tc.options[i], tc.expected[i])
				}
			}
		})
	}
}

// Criteria key order is the wire's: the expected index follows it.
func TestParseLineKeepsCriteriaOrder(t *testing.T) {
	c, err := ParseLine([]byte(`{"id":"o","state":"s","questions":{"q":{"type":"choice","criteria":{"zeta":"z","alpha":"a","mid":"m"}}},"expected":{"q":"alpha"}}`), "x")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range c.Request.Questions[0].Options {
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "zeta,alpha,mid" || c.Expected[0] != 1 {
		t.Fatalf("options %v expected %d", keys, c.Expected[0])
	}
}

func TestParseLineErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`not json`, "not valid JSON"},
		{`[1,2]`, "a case must be a JSON object"},
		{`{"id":"a","id":"b"}`, `key "id" appears twice`},
		{`{"state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":true}}`, `"id" must be a non-empty string`},
		{`{"id":7,"state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":true}}`, `"id" must be a non-empty string`},
		{`{"id":"","state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":true}}`, `"id" must be a non-empty string`},
		{`{"id":"a","set":3,"state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":true}}`, `"set" must be a string`},
		{`{"id":"a","questions":{"q":{"type":"noul"}},"expected":{"q":true}}`, "case a: state: Field required"},
		{`{"id":"a","state":"s","expected":{"q":true}}`, "case a: questions: Field required"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"maybe"}},"expected":{"q":true}}`, "questions.q.type"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"choice","criteria":{"x":"only"}}},"expected":{"q":"x"}}`, "a choice needs at least 2 options"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"noul"}}}`, `"expected" is required`},
		{`{"id":"a","state":"s","questions":{"q":{"type":"noul"}},"expected":[true]}`, `"expected" must be an object`},
		{`{"id":"a","state":"s","questions":{"q":{"type":"noul"}},"expected":{}}`, "expected.q: missing"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":true,"r":true}}`, "expected.r: no question has this id"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":"true"}}`, "is not true or false"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"noul"}},"expected":{"q":true,"q":false}}`, `key "q" appears twice`},
		{`{"id":"a","state":"s","questions":{"q":{"type":"choice","criteria":{"x":"1","y":"2"}}},"expected":{"q":"z"}}`, `"z" is not one of the options "x", "y"`},
		{`{"id":"a","state":"s","questions":{"q":{"type":"choice","criteria":{"x":null,"y":null}}},"expected":{"q":0}}`, "is not a choice key"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"score","criteria":["a","b","c"]}},"expected":{"q":3}}`, "level 3 is not among the 3 levels 0..2"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"score","criteria":["a","b","c"]}},"expected":{"q":-1}}`, "level -1 is not among"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"score","criteria":["a","b","c"]}},"expected":{"q":1.5}}`, "is not a level"},
		{`{"id":"a","state":"s","questions":{"q":{"type":"score","criteria":["a","b","c"]}},"expected":{"q":"b"}}`, "is not a level"},
	} {
		_, err := ParseLine([]byte(tc.line), "x")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.line, err, tc.want)
		}
	}
}

// A choice may carry more options than the wire's default label
// capacity: banking77 has 77. The endpoint says whether it takes them.
func TestParseLineManyOptions(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"id":"b","state":"s","questions":{"intent":{"type":"choice","criteria":{`)
	for i := range 77 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"o` + string(rune('A'+i/26)) + string(rune('a'+i%26)) + `":null`)
	}
	b.WriteString(`}}},"expected":{"intent":"oCy"}}`)
	c, err := ParseLine([]byte(b.String()), "x")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Request.Questions[0].Options); n != 77 || c.Expected[0] != 76 {
		t.Fatalf("%d options, expected %d", n, c.Expected[0])
	}
}

func TestReadNamesFileAndLine(t *testing.T) {
	text := agnews + "\n\n" + strings.Replace(agnews, `"a1"`, `"a2"`, 1) + "\n" + strings.Replace(agnews, `"business"}}`, `"money"}}`, 1) + "\n"
	_, err := Read(strings.NewReader(text), "cases/agnews.jsonl")
	if err == nil || !strings.HasPrefix(err.Error(), `cases/agnews.jsonl:4: case a1: expected.topic: "money" is not one of the options`) {
		t.Fatalf("got %v", err)
	}
	cs, err := Read(strings.NewReader(text[:strings.LastIndex(text[:len(text)-1], "\n")+1]), "cases/agnews.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[1].Line != 3 || cs[1].Where() != "cases/agnews.jsonl:3" || cs[1].ID != "a2" {
		t.Fatalf("%+v", cs)
	}
}

func TestReadLineTooLong(t *testing.T) {
	text := agnews + "\n" + `{"id":"` + strings.Repeat("x", MaxLineBytes) + `"}` + "\n"
	_, err := Read(strings.NewReader(text), "big.jsonl")
	if err == nil || !strings.Contains(err.Error(), "big.jsonl:2: line longer than") {
		t.Fatalf("got %v", err)
	}
}

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.jsonl")
	b := filepath.Join(dir, "b.jsonl")
	empty := filepath.Join(dir, "empty.jsonl")
	lines := func(ids ...string) string {
		var s strings.Builder
		for _, id := range ids {
			s.WriteString(strings.Replace(agnews, `"a1"`, `"`+id+`"`, 1) + "\n")
		}
		return s.String()
	}
	for path, text := range map[string]string{a: lines("1", "2", "3"), b: lines("4", "5", "2"), empty: "\n"} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := ReadFiles(2, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	if strings.Join(ids, ",") != "1,2,4,5" {
		t.Fatalf("ids %v", ids)
	}
	if _, err := ReadFiles(0, a, b); err == nil || !strings.Contains(err.Error(), b+`:3: case id "2" is already used at `+a+":2") {
		t.Fatalf("got %v", err)
	}
	if _, err := ReadFiles(0, a, empty); err == nil || !strings.Contains(err.Error(), "no cases") {
		t.Fatalf("got %v", err)
	}
	if _, err := ReadFiles(0, filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Fatal("a missing file read")
	}
}

// Every shared case file reads whole, with the README's item counts.
func TestSharedData(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "data")
	want := map[string]int{
		"sst2-dev.jsonl": 872, "sst5-dev.jsonl": 1101, "boolq-dev.jsonl": 1635,
		"banking77-train-sample.jsonl": 1000, "banking12-train-sample.jsonl": 600, "agnews-dev.jsonl": 1000,
	}
	for name, n := range want {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err != nil {
			t.Skipf("shared data unavailable: %v", err)
		}
		cs, err := ReadFiles(0, path)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != n {
			t.Errorf("%s: %d cases, README says %d", name, len(cs), n)
		}
	}
}
