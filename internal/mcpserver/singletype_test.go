package mcpserver

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/gateway"
)

func schemaOf(t *testing.T, s string) *jsonschema.Schema {
	t.Helper()
	var out jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return &out
}

// A list of types becomes anyOf branches of one type each, which accept
// exactly the values the list did.
func TestSingleTyped(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		accept, refuse []string
	}{
		{
			name:   "nullable string",
			in:     `{"type":["null","string"],"description":"d","minLength":2}`,
			want:   `{"anyOf":[{"type":"null"},{"minLength":2,"type":"string"}],"description":"d"}`,
			accept: []string{`null`, `"ab"`},
			refuse: []string{`"a"`, `1`, `{}`},
		},
		{
			name:   "nullable object inside an object",
			in:     `{"type":"object","properties":{"e":{"type":["null","object"],"properties":{"c":{"type":"string"}},"required":["c"],"additionalProperties":false}}}`,
			want:   `{"type":"object","properties":{"e":{"anyOf":[{"type":"null"},{"type":"object","properties":{"c":{"type":"string"}},"required":["c"],"additionalProperties":false}]}}}`,
			accept: []string{`{"e":null}`, `{"e":{"c":"x"}}`, `{}`},
			refuse: []string{`{"e":{}}`, `{"e":{"c":"x","d":1}}`, `{"e":"x"}`},
		},
		{
			name:   "an enum applies to every branch",
			in:     `{"type":["string","null"],"enum":["a",null]}`,
			want:   `{"anyOf":[{"type":"string"},{"type":"null"}],"enum":["a",null]}`,
			accept: []string{`"a"`, `null`},
			refuse: []string{`"b"`},
		},
		{
			name:   "an anyOf of its own is kept beside the type's",
			in:     `{"type":["null","number"],"anyOf":[{"type":"null"},{"minimum":1}]}`,
			want:   `{"allOf":[{"anyOf":[{"type":"null"},{"minimum":1}]},{"anyOf":[{"type":"null"},{"type":"number"}]}]}`,
			accept: []string{`null`, `2`},
			refuse: []string{`0`, `"x"`},
		},
		{
			name: "a single type is left alone",
			in:   `{"type":"string","default":"x"}`,
			want: `{"type":"string","default":"x"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := schemaOf(t, tc.in)
			got := singleTyped(in)
			var gotJSON, wantJSON any
			b, _ := json.Marshal(got)
			json.Unmarshal(b, &gotJSON)
			json.Unmarshal([]byte(tc.want), &wantJSON)
			if !reflect.DeepEqual(gotJSON, wantJSON) {
				t.Errorf("got  %s\nwant %s", b, tc.want)
			}
			before, err := in.Resolve(nil)
			if err != nil {
				t.Fatal(err)
			}
			after, err := got.Resolve(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range append(append([]string{}, tc.accept...), tc.refuse...) {
				var inst any
				json.Unmarshal([]byte(v), &inst)
				if (before.Validate(inst) == nil) != (after.Validate(inst) == nil) {
					t.Errorf("%s: the list form says %v, the rewrite %v", v, before.Validate(inst), after.Validate(inst))
				}
			}
			for _, v := range tc.refuse {
				var inst any
				json.Unmarshal([]byte(v), &inst)
				if after.Validate(inst) == nil {
					t.Errorf("%s accepted", v)
				}
			}
		})
	}
	if b, _ := json.Marshal(singleTyped(gateway.ResponseSchema())); !json.Valid(b) {
		t.Fatal("the response schema does not survive the rewrite")
	}
}

// No schema the server lists, input or output, has a list of types.
func TestToolSchemasAreSingleTyped(t *testing.T) {
	g := gateway.New(gateway.Options{})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := New(Options{Gateway: g}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["type"].([]any); ok {
				t.Errorf("%s: type is a list: %v", path, v["type"])
			}
			for k, sub := range v {
				if !dataKeys[k] {
					walk(path+"."+k, sub)
				}
			}
		case []any:
			for _, sub := range v {
				walk(path+"[]", sub)
			}
		}
	}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool)
		var generic any
		json.Unmarshal(b, &generic)
		walk(tool.Name, generic)
	}
	if len(res.Tools) != len(Tools) {
		t.Errorf("%d tools listed", len(res.Tools))
	}
}
