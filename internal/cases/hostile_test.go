package cases

import (
	"strings"
	"testing"
)

// Hostile case files: every line that cannot be used is an error naming
// file and line, never a case read differently than it was written.
func TestReadHostileFiles(t *testing.T) {
	ag := func(old, new string) string { return strings.Replace(agnews, old, new, 1) }
	for _, tc := range []struct{ name, text, want string }{
		{"invalid UTF-8 in the state", ag("Stocks fell.", "Stocks \xff fell."), "x.jsonl:1:"},
		{"invalid UTF-8 in the id", ag(`"a1"`, "\"a\xff1\""), "x.jsonl:1:"},
		{"invalid UTF-8 in a question id", ag(`"topic": {`, "\"top\xffic\": {") + "\n", "x.jsonl:1:"},
		{"invalid UTF-8 in a criteria key", ag(`"world": "world"`, "\"wo\xffrld\": \"world\""), "x.jsonl:1:"},
		{"a NUL byte", ag("Stocks fell.", "Stocks\x00 fell."), "x.jsonl:1: not valid JSON"},
		{"a byte order mark", "\ufeff" + agnews, "x.jsonl:1: not valid JSON"},
		{"the id twice", ag(`"id": "a1", `, `"id": "a1", "id": "a2", `), `x.jsonl:1: a case must be a JSON object: key "id" appears twice`},
		{"the state twice", ag(`"state": "Stocks fell.", `, `"state": "Stocks fell.", "state": "Stocks rose.", `), "x.jsonl:1:"},
		{"an expected answer twice", ag(`{"topic": "business"}`, `{"topic": "business", "topic": "world"}`), "x.jsonl:1:"},
		{"a line over the limit", agnews + "\n" + `{"id":"` + strings.Repeat("x", MaxLineBytes+10) + `"}` + "\n", "x.jsonl:2: line longer than"},
		{"two cases on one line", agnews + " " + ag(`"a1"`, `"a2"`), "x.jsonl:1: not valid JSON"},
		{"a case split over two lines", strings.Replace(agnews, `, "questions"`, ",\n\"questions\"", 1), "x.jsonl:1: not valid JSON"},
		{"a no-break space before the case", "\u00a0" + agnews, "x.jsonl:1: not valid"},
		{"a line of no-break spaces", agnews + "\n\u00a0\u00a0\n", "x.jsonl:2: not valid"},
		{"a lone surrogate in the id", ag(`"a1"`, `"a\ud800"`), "x.jsonl:1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := Read(strings.NewReader(tc.text), "x.jsonl")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("read %d cases (%+v), error %v; want %q", len(cs), firstID(cs), err, tc.want)
			}
		})
	}
	// CRLF line endings and blank lines read as the same cases; a line of
	// exactly the limit is read.
	cs, err := Read(strings.NewReader(agnews+"\r\n\r\n"+strings.Replace(agnews, `"a1"`, `"a2"`, 1)+"\r\n"), "x.jsonl")
	if err != nil || len(cs) != 2 || cs[1].Line != 3 {
		t.Errorf("CRLF: %d cases, %v", len(cs), err)
	}
	pad := MaxLineBytes - len(agnews)
	long := strings.Replace(agnews, "Stocks fell.", "Stocks fell."+strings.Repeat(" ", pad), 1)
	if _, err := Read(strings.NewReader(long+"\n"), "x.jsonl"); err == nil || !strings.Contains(err.Error(), "state") {
		// The state is over the wire's limit long before the line is.
		t.Errorf("a line of exactly the limit: %v", err)
	}
}

func firstID(cs []Case) string {
	if len(cs) == 0 {
		return ""
	}
	return cs[0].ID + " / " + string(cs[0].Request.State)
}

// The line limit is exact: MaxLineBytes is read, one more is too long,
// with either end of line.
func TestReadLineLimitIsExact(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n"} {
		for _, n := range []int{MaxLineBytes, MaxLineBytes + 1} {
			line := `{"id":"` + strings.Repeat("x", n-9) + `"}`
			_, err := Read(strings.NewReader(line+eol), "x.jsonl")
			tooLong := err != nil && strings.Contains(err.Error(), "line longer than")
			if tooLong != (n > MaxLineBytes) {
				t.Errorf("a line of %d bytes ending %q: %v", n, eol, err)
			}
		}
	}
}
