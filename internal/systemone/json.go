package systemone

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// member is one key of a JSON object, with its value verbatim.
type member struct {
	key   string
	value json.RawMessage
}

// members decodes a JSON object keeping its keys in order: criteria key
// order is what the model sees, so a map will not do. It reports a key
// that appears twice.
func members(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // object keys are always strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		out = append(out, member{key, v})
	}
	return out, nil
}

var errNotObject = fmt.Errorf("not an object")

// kindOf names the JSON type of a raw value by its first byte.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "missing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// appendFloat writes a probability the way Jev prints it: shortest
// decimal form, with ".0" on whole numbers (1.0, 0.0), never NaN or Inf.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0 // the domain never hands these out; belt and braces for the wire
	}
	start := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	if !bytes.ContainsAny(b[start:], ".e") {
		b = append(b, '.', '0')
	}
	return b
}

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a Go string always marshals
	return append(b, q...)
}
