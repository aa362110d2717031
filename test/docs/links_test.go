// Package docs_test checks the documentation as a reader follows it: every
// relative link in README.md and the pages under docs/ leads to a file
// that exists and, where it names one, to a heading of that page.
package docs_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, from this package's folder.
var root = filepath.Join("..", "..")

// page is a Markdown page: its path from the repository and its text.
type page struct{ file, text string }

// pages are README.md and every Markdown file under docs/.
func pages(t *testing.T) []page {
	t.Helper()
	out := []page{{"README.md", pageText(t, "README.md")}}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, page{rel, pageText(t, rel)})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDocsLinksResolve(t *testing.T) {
	ps := pages(t)
	if len(ps) < 10 {
		t.Fatalf("found only %d pages", len(ps))
	}
	n := 0
	for _, p := range ps {
		for _, l := range links(p.text) {
			n++
			if err := resolve(filepath.Join(root, p.file), l); err != nil {
				t.Errorf("%s: link %s: %v", p.file, l, err)
			}
		}
	}
	if n < 50 {
		t.Fatalf("read only %d relative links", n)
	}
}

// The checker fails on what a reader would find broken, and the anchors
// are GitHub's: lower case, punctuation dropped, spaces as hyphens, a
// repeated heading numbered.
func TestLinkChecker(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "a.md")
	text := "# A page\n\n## Calibration on `/v1/systemone` (opt-in)\n\n## Spread over slots (`spread_slots`)\n\n" +
		"## Notes\n\n## Notes\n\n```\n## not a heading\n[not a link](missing.md)\n```\n" +
		"See `[code](missing.md)` and [b](b.md#top), [x](https://example.com/x), ![img](a.md).\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(links(text)), "[b.md#top a.md]"; got != want {
		t.Errorf("links: %s, want %s", got, want)
	}
	for _, tc := range []struct {
		link string
		ok   bool
	}{
		{"#a-page", true},
		{"#calibration-on-v1systemone-opt-in", true},
		{"#spread-over-slots-spread_slots", true},
		{"#notes", true},
		{"#notes-1", true},
		{"#notes-2", false},
		{"#not-a-heading", false},
		{"a.md#a-page", true},
		{"a.md#nowhere", false},
		{"missing.md", false},
		{".", true},
	} {
		if err := resolve(page, tc.link); (err == nil) != tc.ok {
			t.Errorf("resolve %q: %v, want ok %v", tc.link, err, tc.ok)
		}
	}
}

var (
	fence      = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// links are the relative link targets of a Markdown text, outside code.
func links(text string) []string {
	text = inlineCode.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
	var out []string
	for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
		l := m[1]
		if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// resolve says what is wrong with link, as written in the page at from.
func resolve(from, link string) error {
	path, anchor, _ := strings.Cut(link, "#")
	target := from
	if path != "" {
		target = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("no such file %s", target)
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(target, ".md") {
		return fmt.Errorf("an anchor into %s, which is not a Markdown page", target)
	}
	b, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	if !anchors(string(b))[anchor] {
		return fmt.Errorf("%s has no heading whose anchor is #%s", target, anchor)
	}
	return nil
}

var (
	heading  = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)
	mdLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlAnch = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// anchors are the anchors GitHub gives a page's headings (and any
// <a name> or <a id> in it).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range htmlAnch.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		s := slug(mdLink.ReplaceAllString(m[1], "$1"))
		if k := seen[s]; k > 0 {
			out[fmt.Sprintf("%s-%d", s, k)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's anchor of a heading: lower case, every character but
// letters, digits, spaces, hyphens and underscores dropped, spaces as
// hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
