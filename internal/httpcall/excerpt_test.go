package httpcall

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An excerpt cuts an error body at a character's start, never inside
// one: a body of multi-byte characters gives a message of valid UTF-8.
func TestExcerptCutsAtACharacter(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"empty", "  \n", "(empty body)"},
		{"short", " a plain error \n", "a plain error"},
		{"ASCII cut", strings.Repeat("x", 250), strings.Repeat("x", 200)},
		// 199 bytes, then a 2-byte character across byte 200.
		{"a 2-byte character across the cut", strings.Repeat("x", 199) + "é and more", strings.Repeat("x", 199)},
		// 3-byte characters: 66 of them are 198 bytes, the 67th crosses it.
		{"3-byte characters", strings.Repeat("€", 100), strings.Repeat("€", 66)},
		{"4-byte characters", strings.Repeat("😀", 60), strings.Repeat("😀", 50)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Excerpt([]byte(c.body))
			if !utf8.ValidString(got) || got != c.want {
				t.Errorf("Excerpt = %q (valid UTF-8: %v), want %q", got, utf8.ValidString(got), c.want)
			}
		})
	}
}
