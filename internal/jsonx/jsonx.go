// Package jsonx reads JSON the way system1's parsers of outside input need
// and encoding/json does not offer: an object's members in their order,
// and a value's JSON type at a glance.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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
	out := make([]Member, 0, 4) // most objects have a few members: one allocation
	var keys keySet
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != '}'; {
		end := skipString(raw, i)
		key, err := unquote(raw[i:end])
		if err != nil {
			return nil, err
		}
		dup := keys.seen(keyOf(raw[i:end]))
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		end = skipValue(raw, i)
		if dup {
			return nil, &DuplicateKeyError{Key: key}
		}
		out = append(out, Member{key, raw[i:end]})
		i = next(raw, end)
	}
	return out, nil
}

// Elements splits a JSON array into its elements, each verbatim, as
// encoding/json decodes it into a []json.RawMessage: copies of the bytes
// sent, here all in one allocation, each capped so that an append to one
// copies it. raw must be valid JSON, checked by the caller; anything
// but an array, null too, is ErrNotArray.
func Elements(raw json.RawMessage) ([]json.RawMessage, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, ErrNotArray
	}
	var small [64][2]int // a batch's states: its most
	bounds := small[:0]
	n := 0
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != ']'; {
		end := skipValue(raw, i)
		bounds = append(bounds, [2]int{i, end})
		n += end - i
		i = next(raw, end)
	}
	buf := make([]byte, 0, n)
	out := make([]json.RawMessage, len(bounds))
	for k, b := range bounds {
		start := len(buf)
		buf = append(buf, raw[b[0]:b[1]]...)
		out[k] = buf[start:len(buf):len(buf)]
	}
	return out, nil
}

// smallObject is how many keys a keySet compares one by one before it
// keeps them in a map: most objects (a question, its criteria) have a
// few, and a map for them costs more than the comparisons.
const smallObject = 8

// Lookup returns the value of the member named key, and whether there is
// one: the members of an object that Members read, so each key once.
func Lookup(ms []Member, key string) (json.RawMessage, bool) {
	for _, m := range ms {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// DuplicateKey finds the first key, in document order, that an object of
// raw holds twice, at any depth: inside a state, instructions or any
// other JSON data as in a wire's own fields, since JSON readers disagree
// on which one wins (encoding/json keeps the last, silently). It returns
// the key's path (keys, and array indexes in decimal), the key last. Keys
// are compared as readers read them, escapes decoded. raw must be valid
// JSON with valid text (InvalidText finds none); every wire refuses what
// this finds, each in its own words.
func DuplicateKey(raw []byte) (path []string, found bool) {
	if bytes.IndexByte(raw, '{') < 0 { // no object, so no key at all
		return nil, false
	}
	var steps [16]keyStep // deeper paths grow it
	w := walker{raw: raw}
	_, found = w.walk(skipSpace(raw, 0), steps[:0])
	return w.path, found
}

// walker is the walk of DuplicateKey and, with text set, of InvalidText.
// Every request body is walked for duplicates, so it allocates nothing
// where it finds none: a key without escapes is compared as the bytes
// between its quotes, and the path is kept as steps, made strings only
// for what it found (issue 34).
type walker struct {
	raw []byte
	// text looks for a string that fails TextOK in place of a key twice.
	text  bool
	path  []string // what was found: its path, once found
	isKey bool     // what was found is a key (the last of path)
}

// keyStep is an object's key (decoded) or, where key is nil, an array's
// index.
type keyStep struct {
	key   []byte
	index int
}

// keyOf is the key quoted in q as readers read it (unquote), without a
// copy where it has no escapes.
func keyOf(q []byte) []byte {
	if plain(q) {
		return q[1 : len(q)-1 : len(q)-1]
	}
	s, _ := unquote(q)
	return append([]byte{}, s...) // not nil, even when empty: a key, not an index
}

// found records the path of what was found: path, then key unless it is
// nil (a string value's path is path).
func (w *walker) found(path []keyStep, key []byte) {
	for _, st := range path {
		if st.key != nil {
			w.path = append(w.path, string(st.key))
		} else {
			w.path = append(w.path, strconv.Itoa(st.index))
		}
	}
	if w.isKey = key != nil; w.isKey {
		w.path = append(w.path, string(key))
	}
}

// walk walks the value at raw[i:], the one at path, returning the index
// past it and whether it holds what w looks for (then w.path is its path).
func (w *walker) walk(i int, path []keyStep) (end int, found bool) {
	raw := w.raw
	if i >= len(raw) {
		return i, false
	}
	switch raw[i] {
	case '"':
		end = skipString(raw, i)
		if w.text && !TextOK(raw[i:end]) {
			w.found(path, nil)
			return end, true
		}
		return end, false
	case '{':
		var keys keySet
		for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != '}'; {
			kend := skipString(raw, i)
			q := raw[i:kend]
			if w.text && !TextOK(q) {
				w.found(path, q[1:len(q)-1])
				return kend, true
			}
			key := keyOf(q)
			if !w.text && keys.seen(key) {
				w.found(path, key)
				return kend, true
			}
			i = skipSpace(raw, skipSpace(raw, kend)+1)
			end, found = w.walk(i, append(path, keyStep{key: key}))
			if found {
				return end, true
			}
			i = next(raw, end)
		}
		return i + 1, false
	case '[':
		n := 0
		for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != ']'; n++ {
			end, found = w.walk(i, append(path, keyStep{index: n}))
			if found {
				return end, true
			}
			i = next(raw, end)
		}
		return i + 1, false
	}
	return skipValue(raw, i), false
}

// keySet holds an object's keys, decoded: the first smallObject in
// small, searched one by one, the rest in a map made then.
type keySet struct {
	small [smallObject][]byte
	n     int
	more  map[string]bool
}

// seen reports whether key is in the set, adding it.
func (ks *keySet) seen(key []byte) bool {
	if ks.more == nil && ks.n < smallObject {
		for _, k := range ks.small[:ks.n] {
			if bytes.Equal(k, key) {
				return true
			}
		}
		ks.small[ks.n] = key
		ks.n++
		return false
	}
	if ks.more == nil {
		ks.more = make(map[string]bool, 2*smallObject)
		for _, k := range ks.small {
			ks.more[string(k)] = true
		}
	}
	if ks.more[string(key)] {
		return true
	}
	ks.more[string(key)] = true
	return false
}

// DuplicateKeyError is the error of Members on an object with a key
// twice, which encoding/json would read as the last of them, silently.
type DuplicateKeyError struct{ Key string }

func (e *DuplicateKeyError) Error() string { return fmt.Sprintf("key %q appears twice", e.Key) }

// ErrInvalidText is the error of Members on a key that decoding would
// change (see TextOK).
var ErrInvalidText = errors.New("a key is not valid UTF-8")

// unquote decodes a JSON string, taking the fast path when it is plain
// ASCII without escapes; encoding/json handles the rest. A key that is
// not valid UTF-8 is an error, not a key with U+FFFD in it, so that a key
// is always read as it was sent.
func unquote(q []byte) (string, error) {
	if plain(q) {
		return string(q[1 : len(q)-1]), nil
	}
	if !TextOK(q) {
		return "", fmt.Errorf("%w: %s", ErrInvalidText, strconv.Quote(string(q)))
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

// IsDuplicate is errors.As(err, dup) for a duplicate key, without the
// allocation errors.As makes of its target: a body or a row is read on
// every request, and almost never holds one.
func IsDuplicate(err error, dup **DuplicateKeyError) bool {
	d, ok := errors.AsType[*DuplicateKeyError](err)
	if ok {
		*dup = d
	}
	return ok
}

// next is the index of what follows a member or element ending at end:
// past its comma, if any.
func next(b []byte, end int) int {
	i := skipSpace(b, end)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	return i
}

// plain reports whether the quoted string q is ASCII without escapes:
// its text is the bytes between its quotes.
func plain(q []byte) bool {
	for _, c := range q {
		if c >= 0x80 || c == '\\' {
			return false
		}
	}
	return len(q) >= 2
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

// ErrNotArray is the error of Elements on a value that is not an array.
var ErrNotArray = errors.New("not an array")

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

// Text renders a JSON value as a model reads it: a string as itself,
// anything else as compact JSON (as sent when it does not compact), and
// nothing as "". A string with nothing to decode (Plain) is read without
// encoding/json: a state is read this way for every prompt laid out over
// it, and most are such strings.
func Text(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if body, ok := Plain(raw); ok {
		return string(body)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Plain is the text of a JSON string with nothing to decode (no escape,
// no control character, valid UTF-8), as the bytes between its quotes,
// without a copy: for a caller that writes the text out. ok is false for
// anything else, whose text is Text's.
func Plain(raw []byte) (body []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	body = raw[1 : len(raw)-1]
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return nil, false
		}
	}
	if !utf8.Valid(body) {
		return nil, false
	}
	return body, true
}

// TextOK reports whether a JSON string, quotes included, decodes to what
// it says: valid UTF-8, and every escaped surrogate one of a pair.
// encoding/json replaces what is not with U+FFFD, so that an id sent that
// way would come back changed.
func TextOK(q []byte) bool {
	if !utf8.Valid(q) {
		return false
	}
	for i := 0; i < len(q); i++ {
		if q[i] != '\\' {
			continue
		}
		i++
		if i >= len(q) || q[i] != 'u' {
			continue
		}
		r := hex4(q, i+1)
		i += 4
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return false // a low surrogate alone
		case r >= 0xd800 && r <= 0xdbff:
			if i+6 >= len(q) || q[i+1] != '\\' || q[i+2] != 'u' {
				return false
			}
			if lo := hex4(q, i+3); utf16.DecodeRune(r, lo) == utf8.RuneError {
				return false
			}
			i += 6
		}
	}
	return true
}

// hex4 reads the four hex digits of a \u escape at q[i:], or -1.
func hex4(q []byte, i int) rune {
	if i+4 > len(q) {
		return -1
	}
	n, err := strconv.ParseUint(string(q[i:i+4]), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}

// InvalidText finds the first string in raw, a key or a value, that fails
// TextOK, and returns its path (keys, and array indexes in decimal), the
// offending key last when it is a key. raw must be valid JSON. The common
// case, a document that is valid UTF-8 without escaped surrogates, is one
// pass over the bytes.
func InvalidText(raw []byte) (path []string, isKey, found bool) {
	if utf8.Valid(raw) && !hasSurrogateEscape(raw) {
		return nil, false, false
	}
	w := walker{raw: raw, text: true}
	_, found = w.walk(skipSpace(raw, 0), nil)
	return w.path, w.isKey, found
}

func hasSurrogateEscape(b []byte) bool {
	for i := 0; i+5 < len(b); i++ {
		if b[i] == '\\' {
			if b[i+1] == 'u' && (b[i+2] == 'd' || b[i+2] == 'D') && bytes.IndexByte([]byte("89abcdefABCDEF"), b[i+3]) >= 0 {
				return true
			}
			i++
		}
	}
	return false
}

// AppendString writes s, valid UTF-8, as a JSON string escaping only what
// JSON requires (a quote, a backslash, control characters): unlike
// encoding/json, never "<", ">", "&", U+2028 or U+2029, so that text
// reaches a model as it was written. Every state and context system1
// builds or rebuilds is written through it or AppendObject.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendObject writes members as a JSON object in their order, each value
// verbatim: the way to rebuild an object read by Members without
// re-encoding what it holds (encoding/json's Marshal escapes HTML in raw
// values, which would change the text a model reads).
func AppendObject(b []byte, ms []Member) []byte {
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, m.Key)
		b = append(b, ':')
		b = append(b, m.Value...)
	}
	return append(b, '}')
}
