package mcpserver

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// singleTyped returns a copy of s in which no schema has a list of types:
// a nullable field's `"type": ["null", "string"]` becomes
// `"anyOf": [{"type": "null"}, {"type": "string"}]`, each branch of one
// type, with the branch of the non-null type keeping the constraints.
// Both spellings accept the same values, but clients that map tool schemas
// onto a single-type dialect (the OpenAPI subset of Gemini's function
// declarations, say) reject or drop the list form, and the MCP
// Inspector's --strict check warns on it. Only the MCP face needs this:
// the published contract in schema/ keeps the inferred form.
func singleTyped(s *jsonschema.Schema) *jsonschema.Schema {
	var generic any
	recode(s, &generic)
	out := new(jsonschema.Schema)
	recode(splitTypes(generic), out)
	return out
}

// recode copies in into out through its JSON.
func recode(in, out any) {
	data, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		panic(fmt.Sprintf("mcpserver: recoding a schema: %v", err)) // our own schema: a bug
	}
}

// dataKeys hold instance values, not schemas: they are left as they are.
var dataKeys = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// outerKeys stay on the outer schema when its types are split: the
// annotations, and the keywords that apply to a value of any type. The
// rest only constrain values of their own type, so moving them into the
// non-null branch accepts exactly what the list of types did.
var outerKeys = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true, "$comment": true,
	"enum": true, "const": true, "allOf": true, "oneOf": true, "not": true, "anyOf": true,
}

// splitTypes rewrites a schema decoded as generic JSON, depth first.
func splitTypes(v any) any {
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = splitTypes(v[i])
		}
		return v
	case map[string]any:
		for k, sub := range v {
			if !dataKeys[k] {
				v[k] = splitTypes(sub)
			}
		}
		types, ok := v["type"].([]any)
		if !ok || len(types) < 2 {
			return v
		}
		outer := map[string]any{}
		var branches []any
		for _, t := range types {
			branch := map[string]any{"type": t}
			if t != "null" {
				for k, sub := range v {
					if k != "type" && !outerKeys[k] {
						branch[k] = sub
					}
				}
			}
			branches = append(branches, branch)
		}
		for k, sub := range v {
			if outerKeys[k] {
				outer[k] = sub
			}
		}
		if anyOf, ok := outer["anyOf"]; ok {
			// Both must hold: the schema's own anyOf and the type's.
			delete(outer, "anyOf")
			allOf, _ := outer["allOf"].([]any)
			outer["allOf"] = append(allOf, map[string]any{"anyOf": anyOf}, map[string]any{"anyOf": branches})
			return outer
		}
		outer["anyOf"] = branches
		return outer
	default:
		return v
	}
}
