package answer

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fleet"
)

// Every field of a request is in the cache key: a field added to
// decision.Request, Question or Option without joining the key fails
// here, so that no answer is served for a question it was not made for.
// Each field is changed alone, to a value a face lets through.
func TestCacheKeyHoldsEveryField(t *testing.T) {
	n, err := fleet.NewNode(config.Node{Name: "n", URL: "http://127.0.0.1:1", Dialect: "llamacpp", Models: []string{"m"}}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := New(Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{Aliases: map[string]string{"alias": "m"}}), Cache: NewCache(1, 0)})
	base := func() Request {
		return Request{Request: decision.Request{Model: "m", State: json.RawMessage(`"s"`), Questions: []decision.Question{{
			ID: "q", Kind: decision.Choice, Instructions: json.RawMessage(`"i"`),
			Options: []decision.Option{{Key: "a", Name: "a", Text: json.RawMessage(`"t"`), Legend: json.RawMessage(`"l"`)}, {Key: "b", Name: "b"}},
		}}}, Provider: "p"}
	}
	want := svc.cacheKey(base(), nil)
	if !want.ok || want.bypass {
		t.Fatalf("base request not cached: %+v", want)
	}
	// What a face would let through in place of each field's value.
	other := map[string]any{
		"Model":  "alias",
		"Debias": decision.DebiasPermute,
		"Prior":  decision.PriorContentFree,
		"Kind":   decision.Score,
		// A set at another coverage is another answer (0, none asked,
		// is the base).
		"Coverage": 0.9,
	}
	var paths []string
	var walk func(path string, get func(*Request) reflect.Value, typ reflect.Type)
	walk = func(path string, get func(*Request) reflect.Value, typ reflect.Type) {
		switch {
		case typ == reflect.TypeFor[json.RawMessage](), typ == reflect.TypeFor[time.Time]():
		case typ.Kind() == reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				if !f.IsExported() {
					continue
				}
				walk(path+"."+f.Name, func(r *Request) reflect.Value { return get(r).Field(i) }, f.Type)
			}
			return
		case typ.Kind() == reflect.Slice:
			walk(path+"[0]", func(r *Request) reflect.Value { return get(r).Index(0) }, typ.Elem())
			return
		}
		paths = append(paths, path)
		r := base()
		v := get(&r)
		switch name := lastName(path); {
		case other[name] != nil:
			v.Set(reflect.ValueOf(other[name]).Convert(typ))
		case typ == reflect.TypeFor[json.RawMessage]():
			v.Set(reflect.ValueOf(json.RawMessage(`"changed"`)))
		case typ == reflect.TypeFor[time.Time]():
			v.Set(reflect.ValueOf(time.Now()))
		case typ.Kind() == reflect.String:
			v.SetString(v.String() + "x")
		case typ.Kind() == reflect.Float64:
			v.SetFloat(v.Float() + 0.5)
		case typ.Kind() == reflect.Bool:
			v.SetBool(!v.Bool())
		case typ.Kind() == reflect.Int:
			v.SetInt(v.Int() + 1)
		default:
			t.Errorf("%s: a %s; teach this test to change one", path, typ)
			return
		}
		got := svc.cacheKey(r, nil)
		if slices.Contains(notInKey, path) {
			if got.key != want.key {
				t.Errorf("%s changed the key; it is who asked, not what", path)
			}
			return
		}
		if !got.ok || got.key == want.key {
			t.Errorf("%s changed, the key did not", path)
		}
	}
	walk("Request", func(r *Request) reflect.Value { return reflect.ValueOf(r).Elem() }, reflect.TypeFor[Request]())
	if len(paths) < 12 {
		t.Errorf("walked %d fields: %v", len(paths), paths)
	}
}

// The fields of Request that are who asked, not what: an answer is the
// same whoever asks it, so they stay out of the key. A stage's answer is
// its model's, whether a cascade asked it or a caller.
var notInKey = []string{"Request.Face", "Request.RequestID", "Request.Start", "Request.Cascade", "Request.Stage", "Request.Key"}

func lastName(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' {
			return path[i+1:]
		}
	}
	return path
}

// Len is the number of answers kept, expired ones not yet dropped among
// them.
func (c *Cache) Len() int { return c.lru.Len() }
