package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		in      string
		keys    []string
		values  []string
		wantErr bool
	}{
		{`{"b":1,"a":[1,{"x":"}"}],"c":null}`, []string{"b", "a", "c"}, []string{`1`, `[1,{"x":"}"}]`, `null`}, false},
		{` { "k" : "v\"}" , "e\u00e9" : true } `, []string{"k", "eé"}, []string{`"v\"}"`, `true`}, false},
		{`{}`, nil, nil, false},
		{`{"a":1,"a":2}`, nil, nil, true},
		{`[1]`, nil, nil, true},
		{`"s"`, nil, nil, true},
		{"{\"q\xff\":1}", nil, nil, true},
		{`{"q\ud800":1}`, nil, nil, true},
		{`{"q\udc00":1}`, nil, nil, true},
		{`{"q\ud83d\ude00":1}`, []string{"q\U0001F600"}, []string{`1`}, false},
		{`{"\ufffd":1}`, []string{"\ufffd"}, []string{`1`}, false},
	} {
		ms, err := Members(json.RawMessage(tc.in))
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: err %v", tc.in, err)
		}
		var keys, values []string
		for _, m := range ms {
			keys = append(keys, m.Key)
			values = append(values, string(m.Value))
		}
		if !reflect.DeepEqual(keys, tc.keys) || !reflect.DeepEqual(values, tc.values) {
			t.Errorf("%s: %q %q, want %q %q", tc.in, keys, values, tc.keys, tc.values)
		}
	}
}

func TestKind(t *testing.T) {
	for in, want := range map[string]string{
		`"s"`: "string", ` {}`: "object", "\n[]": "array", `null`: "null",
		`true`: "boolean", `false`: "boolean", `-1.5`: "number", ``: "missing", `  `: "missing",
	} {
		if got := Kind(json.RawMessage(in)); got != want {
			t.Errorf("Kind(%q) = %s, want %s", in, got, want)
		}
	}
}

// InvalidText finds the string decoding would change, by its path, and
// only such a string.
func TestInvalidText(t *testing.T) {
	for _, tc := range []struct {
		in    string
		path  []string
		isKey bool
		found bool
	}{
		{`{"a":"b","c":["\u00e9",{"d":"\ud83d\ude00"}]}`, nil, false, false},
		{`{"a":"\ufffd","\\ud800":"\\udc00"}`, nil, false, false},
		{"{\"questions\":{\"q\xff\":{}}}", []string{"questions", "q\xff"}, true, true},
		{"{\"state\":{\"a\":[1,\"ok\",\"x\xc3\"]}}", []string{"state", "a", "2"}, false, true},
		{`{"state":"lone \ud800 high"}`, []string{"state"}, false, true},
		{`{"state":"lone \udc00 low"}`, []string{"state"}, false, true},
		{`{"state":"\ud800\u0041"}`, []string{"state"}, false, true},
		{`{"q":{"type":"x","criteria":{"\ud800":null}}}`, []string{"q", "criteria", `\ud800`}, true, true},
		{"\"\xff\"", nil, false, true},
	} {
		path, isKey, found := InvalidText([]byte(tc.in))
		if found != tc.found || isKey != tc.isKey || !reflect.DeepEqual(path, tc.path) {
			t.Errorf("%q: %q %v %v, want %q %v %v", tc.in, path, isKey, found, tc.path, tc.isKey, tc.found)
		}
	}
}

// Members agrees with encoding/json on every valid object: the same keys
// and values, in document order. Where they part, Members is right: a key
// twice (encoding/json keeps the last silently) or a key that is not
// valid UTF-8 (encoding/json replaces it with U+FFFD, so it is no longer
// the key that was sent). Then InvalidText finds a bad string, and when
// it is the first key, its decoded form holds a U+FFFD that the raw key
// does not spell.
// sentReplacements counts the U+FFFD a JSON string's inside spells, as
// the character or as its escape.
func sentReplacements(raw string) int {
	n := strings.Count(raw, "\uFFFD")
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+5 < len(raw) && raw[i+1] == 'u' && strings.EqualFold(raw[i+2:i+6], "fffd") {
			n++
		}
		i++ // past the escaped character, so that \\ufffd is not counted
	}
	return n
}

func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,{"x":"}"}],"c":null}`, `{"\u0041":"\\"}`, `{}`, `{"a":{"b":{"c":[]}}}`, `[]`,
		"{\"q\xff\":1}", `{"\ud800":1}`, `{"\ud83d\ude00":1}`, "{\"a\":\"\xff\",\"b\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		ms, err := Members(in)
		var m map[string]json.RawMessage
		if json.Unmarshal(in, &m) != nil || m == nil {
			if err == nil {
				t.Fatalf("%s is not an object, yet Members read %v", in, ms)
			}
			return
		}
		var dup *DuplicateKeyError
		switch {
		case errors.As(err, &dup):
			return // encoding/json keeps the last of a key silently
		case errors.Is(err, ErrInvalidText):
			path, isKey, found := InvalidText(in)
			if !found {
				t.Fatalf("%q: Members says %v, InvalidText finds nothing", in, err)
			}
			if !isKey || len(path) != 1 {
				return // a value before the key is bad too
			}
			// encoding/json reads what is not valid text as U+FFFD: the
			// key decodes to more of them than were sent.
			var k string
			if json.Unmarshal([]byte(`"`+path[0]+`"`), &k) != nil || strings.Count(k, "\uFFFD") <= sentReplacements(path[0]) {
				t.Fatalf("%q: key %q decodes to %q, which is what was sent", in, path[0], k)
			}
			return
		case err != nil:
			t.Fatalf("%s: %v", in, err)
		}
		if len(ms) != len(m) {
			t.Fatalf("%s: %d members, encoding/json found %d", in, len(ms), len(m))
		}
		for _, mem := range ms {
			if !utf8.ValidString(mem.Key) {
				t.Fatalf("%q: key %q is not valid UTF-8", in, mem.Key)
			}
			// Numbers as their text: a valid number beyond float64
			// (7e7777) does not decode as one, and is still the same.
			decode := func(raw []byte) (v any, err error) {
				d := json.NewDecoder(bytes.NewReader(raw))
				d.UseNumber()
				err = d.Decode(&v)
				return v, err
			}
			a, errA := decode(mem.Value)
			b, errB := decode(m[mem.Key])
			if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: member %q is %s, encoding/json says %s", in, mem.Key, mem.Value, m[mem.Key])
			}
		}
	})
}

// TestMembersDuplicateAnySize checks that a key twice is found wherever it
// is, in objects of a few members (compared one by one) and of many (kept
// in a map), and that Lookup finds every member.
func TestMembersDuplicateAnySize(t *testing.T) {
	for _, n := range []int{1, 2, smallObject - 1, smallObject, smallObject + 1, 3 * smallObject} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf(`"k%d":%d`, i, i)
		}
		ms, err := Members(json.RawMessage("{" + strings.Join(keys, ",") + "}"))
		if err != nil || len(ms) != n {
			t.Fatalf("%d distinct keys: %d members, %v", n, len(ms), err)
		}
		for i := range n {
			if v, ok := Lookup(ms, fmt.Sprintf("k%d", i)); !ok || string(v) != fmt.Sprint(i) {
				t.Errorf("%d keys: Lookup k%d = %s, %v", n, i, v, ok)
			}
		}
		if _, ok := Lookup(ms, "absent"); ok {
			t.Errorf("%d keys: Lookup found a key that is not there", n)
		}
		for _, at := range []int{0, n / 2, n - 1} {
			dup := append(append([]string(nil), keys...), fmt.Sprintf(`"k%d":"again"`, at))
			_, err := Members(json.RawMessage("{" + strings.Join(dup, ",") + "}"))
			var de *DuplicateKeyError
			if !errors.As(err, &de) || de.Key != fmt.Sprintf("k%d", at) {
				t.Errorf("%d keys, k%d twice: %v", n, at, err)
			}
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{``, ``},
		{`"plain <b> & \u00e9"`, `plain <b> & é`},
		{`{"a": [1, 2],  "b": "x"}`, `{"a":[1,2],"b":"x"}`},
		{` [ "x" ] `, `["x"]`},
		{`7`, `7`},
		{`{"broken"`, `{"broken"`},
		{`"plain, no escape"`, `plain, no escape`},
		{`"é and 日本"`, `é and 日本`},
		{`""`, ``},
		{"\"bad \xff utf-8\"", "bad \ufffd utf-8"},
		{"\"a\tcontrol\"", "\"a\tcontrol\""},
		{`"a"b"`, `"a"b"`},
		{`"unterminated`, `"unterminated`},
		{` "spaced" `, `spaced`},
	} {
		if got := Text(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("Text(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// AppendString writes a string that decodes to itself, escaping only
// what JSON requires; AppendObject keeps each value verbatim.
func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{"Tom & Jerry <b>", `"Tom & Jerry <b>"`},
		{"say \"hi\"\\", `"say \"hi\"\\"`},
		{"a\nb\rc\td\x01\x1f", `"a\nb\rc\td\u0001\u001f"`},
		{"line\u2028sep café", "\"line\u2028sep café\""},
		{"", `""`},
	} {
		got := string(AppendString([]byte("x"), tc.in))[1:]
		var back string
		if got != tc.want || json.Unmarshal([]byte(got), &back) != nil || back != tc.in {
			t.Errorf("%q: %s, want %s (decodes to %q)", tc.in, got, tc.want, back)
		}
	}
	obj := AppendObject(nil, []Member{{Key: "a&b", Value: json.RawMessage(`"x \u0026 <y>"`)}, {Key: "n", Value: json.RawMessage(`1.50`)}})
	if string(obj) != `{"a&b":"x \u0026 <y>","n":1.50}` {
		t.Errorf("AppendObject: %s", obj)
	}
}

// DuplicateKey finds the first object, at any depth, holding a key twice
// (as JSON readers read keys: escapes decoded), and names its path.
func TestDuplicateKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`{"a":1,"b":2}`, nil},
		{`"text"`, nil},
		{`[1,{"a":1},{"a":2}]`, nil},
		{`{"a":1,"a":2}`, []string{"a"}},
		{`{"a":1,"\u0061":2}`, []string{"a"}},
		{`{"s":{"t":[0,{"x":1,"y":{},"x":3}]}}`, []string{"s", "t", "1", "x"}},
		{`{"a":{"k":1},"b":{"k":1,"k":2},"a":0}`, []string{"b", "k"}},
		{` [ { "a" : 1 , "a" : 2 } ] `, []string{"0", "a"}},
	} {
		path, found := DuplicateKey([]byte(tc.in))
		if found != (tc.want != nil) || !slices.Equal(path, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.in, path, found, tc.want)
		}
	}
}

// TestDuplicateKeyAllocatesNothing holds the check every request body
// gets to no allocation where it finds no duplicate: it walked each key
// into a new string and a new path before (issue 34: the largest
// allocator on the forwarding path).
func TestDuplicateKeyAllocatesNothing(t *testing.T) {
	body := []byte(`{"model":"m","state":{"ticket":"charged twice","tags":["a","b"],"meta":{"x":1,"y":[{"z":null}]}},"questions":{` +
		`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}},` +
		`"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`)
	if n := testing.AllocsPerRun(100, func() {
		if _, found := DuplicateKey(body); found {
			t.Fatal("found a duplicate in a body without one")
		}
	}); n != 0 {
		t.Errorf("DuplicateKey made %v allocations a call, want 0", n)
	}
}

// TestDuplicateKeyLargeObjects covers objects over smallObject keys, where
// keys are looked up in a map, with escaped keys among them.
func TestDuplicateKeyLargeObjects(t *testing.T) {
	keys := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `"last":{"in":[1,2]}}`)
		return b.String()
	}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{keys(20, ""), nil},
		{keys(20, `"k3":0,`), []string{"k3"}},
		{keys(20, `"\u006b7":0,`), []string{"k7"}},
		{`[` + keys(9, "") + `,` + keys(12, `"k11":{},`) + `]`, []string{"1", "k11"}},
		{`{"o":` + keys(10, `"last":1,`) + `}`, []string{"o", "last"}},
	} {
		path, found := DuplicateKey([]byte(tc.in))
		if found != (tc.want != nil) || !slices.Equal(path, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.in, path, found, tc.want)
		}
	}
}

// Plain agrees with encoding/json wherever it reads a string.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"x"`, `""`, `"é"`, "\"\xff\"", `"a\"b"`, `"\u00e9"`, "\"\t\"", `7`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		body, ok := Plain(raw)
		if !ok {
			return
		}
		got := string(body)
		var want string
		if err := json.Unmarshal(raw, &want); err != nil || got != want {
			t.Fatalf("Plain(%q) = %q; encoding/json: %q, %v", raw, got, want, err)
		}
	})
}
