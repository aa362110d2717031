package httpapi

import (
	"strconv"
	"strings"
	"testing"
)

// validFieldValue is RFC 9110's field-value, as strict as net/http's
// httpguts.ValidHeaderFieldValue and stricter: visible ASCII, spaces and
// tabs, no control character, no space or tab at either end. (Bytes over
// 0x7f, obs-text, are allowed by the RFC; system1 never writes them.)
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return strings.Trim(v, " \t") == v
}

func TestHeaderText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"q1", 40, "q1"},
		{"a\x01b\x7fc\x00d\x1be", 40, `a\x01b\x7fc\x00d\x1be`},
		{`back\slash`, 40, `back\\slash`},
		{"é", 40, `\xc3\xa9`},
		{strings.Repeat("x", 40), 40, strings.Repeat("x", 40)},
		{strings.Repeat("x", 41), 40, strings.Repeat("x", 37) + "..."},
		{strings.Repeat("x", 35) + "\x01\x01", 40, strings.Repeat("x", 35) + "..."},
		{"", 40, ""},
	} {
		if got := headerText(tc.in, tc.n); got != tc.want {
			t.Errorf("headerText(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestHeaderList(t *testing.T) {
	if got := headerList(nil); got != "" {
		t.Errorf("no items: %q", got)
	}
	if got := headerList([]string{"a: one", "b\x01: two"}); got != `a: one; b\x01: two` {
		t.Errorf("two items: %q", got)
	}
	many := make([]string, 100)
	for i := range many {
		many[i] = strings.Repeat("w", 100)
	}
	got := headerList(many)
	if len(got) > maxHeaderValue || !strings.HasSuffix(got, " more") || !strings.HasPrefix(got, strings.Repeat("w", 100)+"; ") {
		t.Errorf("100 items of 100 bytes: %d bytes, %q", len(got), got)
	}
}

// Whatever the warnings hold, the header is a valid field value of at
// most maxHeaderValue bytes, a name in it at most maxHeaderName and a
// list of names at most maxHeaderNames and its count.
func FuzzHeaderList(f *testing.F) {
	f.Add("q1: 2 option(s) missing: a,b", byte(';'), 3)
	f.Add("\x00\x01\x7f\x1b\r\n \t\\xff\xff", byte('\n'), 200)
	f.Add(strings.Repeat("é", 600), byte('x'), 1)
	f.Fuzz(func(t *testing.T, s string, sep byte, copies int) {
		copies = min(max(copies, 1), 500)
		items := strings.Split(strings.Repeat(s+string(sep), copies), string(sep))
		for _, it := range items {
			if v := headerName(it); !validFieldValue(strings.TrimSpace(v)) || len(v) > maxHeaderName {
				t.Fatalf("headerName(%q) = %q", it, v)
			}
		}
		if v := headerNames(items); !validFieldValue(strings.TrimSpace(v)) || len(v) > maxHeaderNames+len(",... ("+strconv.Itoa(len(items))+" in all)") {
			t.Fatalf("headerNames of %d items = %q (%d bytes)", len(items), v, len(v))
		}
		v := headerList(items)
		if !validFieldValue(v) || len(v) > maxHeaderValue {
			t.Fatalf("headerList of %d items = %q (%d bytes)", len(items), v, len(v))
		}
	})
}
