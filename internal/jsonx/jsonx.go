// Package jsonx reads JSON the way system1's parsers of outside input need
// and encoding/json does not offer: an object's members in their order,
// and a value's JSON type at a glance.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Member is one key of a JSON object, with its value verbatim.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Members splits a JSON object into its members, keeping their order
// (criteria key order is what a model sees, so a map will not do), and
// reports a key that appears twice. raw must be valid JSON, checked once
// for the whole document by the caller, so one pass over the bytes finds
// the members' bounds without decoding their values, which alias raw.
func Members(raw json.RawMessage) ([]Member, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, ErrNotObject
	}
	var out []Member
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
		out = append(out, Member{key, raw[i:end]})
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

// ErrNotObject is the error of Members on a value that is not an object.
var ErrNotObject = errors.New("not an object")

// Kind names the JSON type of a raw value by its first byte: "string",
// "object", "array", "null", "boolean" or "number", or "missing" for an
// empty one.
func Kind(raw json.RawMessage) string {
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
