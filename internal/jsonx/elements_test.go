package jsonx

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// elementsAsEncodingJSON checks Elements against encoding/json decoding
// raw, valid JSON, into a []json.RawMessage: the same elements, byte for
// byte, an empty array as an empty list, anything else refused by both
// (null too, which encoding/json reads as no list).
func elementsAsEncodingJSON(t *testing.T, raw []byte) {
	t.Helper()
	var want []json.RawMessage
	wantErr := json.Unmarshal(raw, &want)
	if string(bytes.TrimSpace(raw)) == "null" {
		wantErr = ErrNotArray
	}
	got, err := Elements(raw)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("Elements(%s): error %v, encoding/json: %v", raw, err, wantErr)
	}
	if err != nil {
		return
	}
	if len(got) != len(want) || (got == nil) != (want == nil) {
		t.Fatalf("Elements(%s) = %q, encoding/json: %q", raw, got, want)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) || cap(got[i]) != len(got[i]) {
			t.Fatalf("Elements(%s)[%d] = %q (cap %d), encoding/json: %q", raw, i, got[i], cap(got[i]), want[i])
		}
	}
}

var elementCases = []string{`[]`, ` [ ] `, `["a"]`, `[ "a" , {"b": [1, 2]} , [3,[4]], "x\"]", 1.5e3, -0, true, false, null ]`,
	"[\n\t\"tab\"\r\n]", `[{"k":"}"},"]",["[",{"}":"{"}]]`, `{"a":1}`, `"s"`, `1`, `null`, `[` + strings.Repeat(`"state", `, 99) + `"last"]`}

func TestElements(t *testing.T) {
	for _, c := range elementCases {
		elementsAsEncodingJSON(t, []byte(c))
	}
	// Each element is its own: an append to one leaves the next as sent.
	got, _ := Elements([]byte(`["a","b"]`))
	_ = append(got[0], 'x')
	if string(got[1]) != `"b"` {
		t.Errorf("an append to the first element wrote into the second: %s", got[1])
	}
}

func FuzzElements(f *testing.F) {
	for _, c := range elementCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // the caller checks first
		}
		elementsAsEncodingJSON(t, raw)
	})
}
