package jsonx

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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

// Members agrees with encoding/json on every valid object: the same keys
// and values, in document order.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,{"x":"}"}],"c":null}`, `{"\u0041":"\\"}`, `{}`, `{"a":{"b":{"c":[]}}}`, `[]`} {
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
		if err != nil {
			if strings.Contains(err.Error(), "appears twice") {
				return // encoding/json keeps the last of a key silently
			}
			t.Fatalf("%s: %v", in, err)
		}
		if len(ms) != len(m) {
			t.Fatalf("%s: %d members, encoding/json found %d", in, len(ms), len(m))
		}
		for _, mem := range ms {
			var a, b any
			if json.Unmarshal(mem.Value, &a) != nil || json.Unmarshal(m[mem.Key], &b) != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: member %q is %s, encoding/json says %s", in, mem.Key, mem.Value, m[mem.Key])
			}
		}
	})
}
