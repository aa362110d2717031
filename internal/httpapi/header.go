package httpapi

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
)

// Bounds of a response header built from caller input (question ids,
// option names) or an engine's (model names). A header carries a summary
// a client can show; the detail goes to the request's log line. Node's
// fetch refuses a head over 16 KB, Python's http.client a line over 64 KB,
// and no client wants a control character.
const (
	maxHeaderValue = 400 // one header value, in bytes
	maxHeaderItem  = 200 // one warning in it
	maxHeaderName  = 40  // one id or name in a warning
	maxHeaderNames = 90  // a list of names in a warning
)

// headerText escapes s for a header value and cuts it to at most n bytes:
// printable ASCII stays as it is (a backslash doubled), any other byte is
// \xHH, and what does not fit ends in "...". The result is printable
// ASCII whatever s holds, so always a valid field value.
func headerText(s string, n int) string { return escapeCut(s, n, true) }

// escapeCut is headerText, doubling backslashes or not: text escaped once
// (a warning made of headerName's) is kept as it is.
func escapeCut(s string, n int, backslash bool) string {
	same := len(s) <= n
	for i := 0; same && i < len(s); i++ {
		same = kept(s[i], backslash)
	}
	if same {
		return s // most ids and names: kept as they are, not rebuilt byte by byte
	}
	var b strings.Builder
	b.Grow(min(len(s), n) + 4)
	cut := -1 // where the text ends if it must be cut: the last whole escape within n-3
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case kept(c, backslash):
			b.WriteByte(c)
		case c == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(`\x` + strconv.FormatUint(uint64(c)|0x100, 16)[1:])
		}
		if b.Len() <= n-3 {
			cut = b.Len()
		}
		if b.Len() > n {
			break
		}
	}
	if b.Len() <= n {
		return b.String()
	}
	return b.String()[:max(cut, 0)] + "..."
}

// kept reports whether escapeCut writes c as it is: printable ASCII, a
// backslash only where backslashes are not doubled.
func kept(c byte, backslash bool) bool {
	return c >= 0x20 && c < 0x7f && (c != '\\' || !backslash)
}

// headerList joins items into one header value of at most maxHeaderValue
// bytes, "; " between them: each item cut to maxHeaderItem (any byte
// that is not printable ASCII escaped, though headerName's are already),
// and those that do not fit counted, "; 3 more". It returns "" for no
// items.
func headerList(items []string) string {
	const reserve = len("; 18446744073709551615 more")
	var b strings.Builder
	for i, it := range items {
		it = strings.TrimSpace(escapeCut(it, maxHeaderItem, false))
		sep := "; "
		if b.Len() == 0 {
			sep = ""
		}
		if b.Len()+len(sep)+len(it) > maxHeaderValue-reserve {
			b.WriteString(sep + strconv.Itoa(len(items)-i) + " more")
			break
		}
		b.WriteString(sep + it)
	}
	return strings.TrimSpace(b.String())
}

// headerName is an id or name as a warning in a header shows it.
func headerName(s string) string { return headerText(s, maxHeaderName) }

// headerNames lists names for a warning, comma-separated, as many as fit
// in maxHeaderNames bytes, then how many there are in all: "a,b,... (39
// in all)".
func headerNames(names []string) string {
	var b strings.Builder
	for i, n := range names {
		n = headerName(n)
		if i > 0 && b.Len()+1+len(n) > maxHeaderNames {
			return b.String() + ",... (" + strconv.Itoa(len(names)) + " in all)"
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
	}
	return b.String()
}

// noteLog adds an attribute to the request's log line (see observe).
func noteLog(ctx context.Context, key string, value any) {
	ri := info(ctx)
	ri.notes = append(ri.notes, slog.Any(key, value))
}
