package systemone

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"system1/internal/jsonx"
)

// The syntax of JSON as replyReader reads it: each function checks what
// it reads as encoding/json's scanner does (RFC 8259, nesting up to
// maxDepth), so that a reply is checked in the one pass that reads it.

// maxDepth is encoding/json's bound on nesting.
const maxDepth = 10000

// decodeString is the string a JSON string q (quotes included) holds: q
// itself when it is plain (ASCII without escapes), else as encoding/json
// decodes it (invalid UTF-8 becomes U+FFFD).
func decodeString(q []byte, plain bool) string {
	if plain {
		return string(q[1 : len(q)-1])
	}
	var s string
	_ = json.Unmarshal(q, &s) // q was checked as it was read
	return s
}

// object reads an object, calling member with each key (quotes included)
// and whether it is plain, with r.i at the member's value, which member
// reads.
func (r *replyReader) object(member func(key []byte, plain bool) error) error {
	if r.peek() != '{' {
		return r.syntax("looking for an object")
	}
	return r.container('}', "after an object member", func() error {
		r.space()
		key, plain, err := r.stringToken()
		if err != nil {
			return err
		}
		if r.peek() != ':' {
			return r.syntax("after an object key")
		}
		r.i++
		r.space()
		return member(key, plain)
	})
}

// container reads an object or an array from its opening byte at r.i:
// elements read by elem, separated by commas, up to end.
func (r *replyReader) container(end byte, after string, elem func() error) error {
	if r.depth++; r.depth > maxDepth {
		return errors.New("exceeded max depth")
	}
	r.i++
	if r.peek() == end {
		r.i++
		r.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case end:
			r.i++
			r.depth--
			return nil
		default:
			return r.syntax(after)
		}
	}
}

// skip reads any value, checking its syntax.
func (r *replyReader) skip() error {
	switch c := r.peek(); {
	case c == '{':
		return r.object(func([]byte, bool) error { return r.skip() })
	case c == '[':
		return r.container(']', "after an array element", r.skip)
	case c == '"':
		_, _, err := r.stringToken()
		return err
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, err := r.number()
		return err
	}
	return r.syntax("looking for the beginning of a value")
}

// stringToken reads a string and returns it with its quotes, and whether
// it is plain: ASCII without escapes, so that it says what it holds.
func (r *replyReader) stringToken() (q []byte, plain bool, err error) {
	in := r.in
	if r.i >= len(in) || in[r.i] != '"' {
		return nil, false, r.syntax("looking for a string")
	}
	plain = true
	for i := r.i + 1; i < len(in); i++ {
		switch c := in[i]; {
		case c == '"':
			q, r.i = in[r.i:i+1], i+1
			return q, plain, nil
		case c == '\\':
			plain = false
			if i++; i >= len(in) {
				break
			}
			switch in[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(in) || !isHex(in[i+1]) || !isHex(in[i+2]) || !isHex(in[i+3]) || !isHex(in[i+4]) {
					r.i = i
					return nil, false, r.syntax("in a \\u escape")
				}
				i += 4
			default:
				r.i = i
				return nil, false, r.syntax("in a string escape")
			}
		case c < 0x20:
			r.i = i
			return nil, false, r.syntax("in a string (a control character)")
		case c >= 0x80:
			plain = false
		}
	}
	r.i = len(in)
	return nil, false, r.syntax("in a string (the input ends)")
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// number reads a number as JSON writes one and returns it verbatim.
func (r *replyReader) number() ([]byte, error) {
	in, i := r.in, r.i
	digits := func() bool {
		start := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case !digits():
		r.i = i
		return nil, r.syntax("in a number")
	}
	if i < len(in) && in[i] == '.' {
		if i++; !digits() {
			r.i = i
			return nil, r.syntax("in a number's fraction")
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		if i++; i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if !digits() {
			r.i = i
			return nil, r.syntax("in a number's exponent")
		}
	}
	lit := in[r.i:i]
	r.i = i
	return lit, nil
}

// literal reads true, false or null.
func (r *replyReader) literal(word string) error {
	if !bytes.HasPrefix(r.in[r.i:], []byte(word)) {
		return r.syntax("in a literal")
	}
	r.i += len(word)
	return nil
}

func (r *replyReader) space() {
	for r.i < len(r.in) {
		switch r.in[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek is the next byte that is not space, 0 at the end.
func (r *replyReader) peek() byte {
	if r.space(); r.i < len(r.in) {
		return r.in[r.i]
	}
	return 0
}

func (r *replyReader) syntax(where string) error {
	return fmt.Errorf("invalid JSON at byte %d: unexpected %s %s", r.i, r.here(), where)
}

// typeError is a value of the wrong JSON type, at r.i.
func (r *replyReader) typeError(want string) error {
	return fmt.Errorf("%s is required, got %s", want, jsonx.Kind(r.in[r.i:]))
}

// here describes the byte at r.i.
func (r *replyReader) here() string {
	if r.i >= len(r.in) {
		return "end of input"
	}
	return strconv.Quote(string(r.in[r.i : r.i+1]))
}
