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

// members splits a JSON object into its members, keeping their order:
// criteria key order is what the model sees, so a map will not do. It
// reports a key that appears twice. raw must be valid JSON (ParseRequest
// checks the whole body once), so one pass over the bytes finds the
// members' bounds without decoding their values.
func members(raw json.RawMessage) ([]member, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, errNotObject
	}
	var out []member
	seen := map[string]bool{}
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != '}'; {
		end := skipString(raw, i)
		key, err := unquote(raw[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		end = skipValue(raw, i)
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		out = append(out, member{key, raw[i:end]})
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, nil
}

// unquote decodes a JSON string, taking the fast path when it is plain
// ASCII without escapes; encoding/json handles the rest, replacing invalid
// UTF-8 as it does everywhere else.
func unquote(q []byte) (string, error) {
	plain := len(q) >= 2
	for _, c := range q {
		plain = plain && c < 0x80 && c != '\\'
	}
	if plain {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value starting at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ { // a number, true, false or null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
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

// appendString writes s as a JSON string: as is when it is plain
// printable ASCII, the common case, else escaped by encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a Go string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
