package docs_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"system1/internal/config"
	"system1/internal/gateway"
	"system1/internal/testbin"
)

// block is a fenced code block of a page: its info string's language,
// its text (the fence's indentation taken off) and the line it starts on.
type block struct {
	file, lang, text string
	line             int
}

// indented are the lines of indented code blocks, four spaces in or more
// outside any fence, of every page, each as a block of its own.
func indented(t *testing.T) []block {
	t.Helper()
	var out []block
	for _, p := range pages(t) {
		in := false
		for n, l := range strings.Split(p.text, "\n") {
			if fenceLine.MatchString(l) {
				in = !in
				continue
			}
			if !in && strings.HasPrefix(l, "    ") && strings.TrimSpace(l) != "" {
				out = append(out, block{file: p.file, lang: "indented", text: strings.TrimSpace(l) + "\n", line: n})
			}
		}
	}
	return out
}

// blocks are the fenced code blocks of every page.
func blocks(t *testing.T) []block {
	t.Helper()
	var out []block
	for _, p := range pages(t) {
		out = append(out, fenced(p.file, p.text)...)
	}
	return out
}

var fenceLine = regexp.MustCompile("^( *)```\\s*([A-Za-z0-9_-]*)")

// fenced splits a page's fenced blocks out: a fence opens with ``` and
// its language, and the next fence at any indentation closes it.
func fenced(file, text string) []block {
	var out []block
	var cur *block
	indent := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		m := fenceLine.FindStringSubmatch(l)
		switch {
		case m != nil && cur == nil:
			cur, indent = &block{file: file, lang: m[2], line: n}, m[1]
		case m != nil:
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(l, indent) + "\n"
		}
	}
	return out
}

// sections are the top-level keys of system1's configuration file, read
// from Config's yaml tags.
func sections() map[string]bool {
	out := map[string]bool{}
	ty := reflect.TypeFor[config.Config]()
	for i := range ty.NumField() {
		if tag, _, _ := strings.Cut(ty.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			out[tag] = true
		}
	}
	return out
}

// Every YAML block of the docs whose keys are system1's sections is a
// configuration, whole or a part, that system1 takes as copied: it
// parses (unknown keys are errors), passes system1's checks as far as it
// goes (a part without nodes is not held to have them), and names no
// file a reader who copies it would not have: a fits file only where
// the page shows the command that writes it (`--out FILE`). The other YAML blocks are another
// program's (Helm values, LiteLLM's) and are at least YAML.
func TestDocsConfigurationsLoad(t *testing.T) {
	known := sections()
	configs := 0
	for _, b := range blocks(t) {
		if b.lang != "yaml" && b.lang != "yml" {
			continue
		}
		at := fmt.Sprintf("%s:%d", b.file, b.line)
		var doc any
		if err := yaml.Unmarshal([]byte(b.text), &doc); err != nil {
			t.Errorf("%s: the YAML block does not parse: %v", at, err)
			continue
		}
		// A list (a CI job's steps) is another program's.
		top, _ := doc.(map[string]any)
		if len(top) == 0 || slices.ContainsFunc(keysOf(top), func(k string) bool { return !known[k] }) {
			continue
		}
		configs++
		cfg, err := config.Parse([]byte(b.text))
		if err != nil {
			t.Errorf("%s: system1 refuses the configuration: %v\n%s", at, err, b.text)
			continue
		}
		cfg.Normalize()
		for _, e := range cfg.Check() {
			if whole(top) || !strings.Contains(e.Error(), "chain") && !strings.Contains(e.Error(), "nodes") {
				t.Errorf("%s: %v\n%s", at, e, b.text)
			}
		}
		if f := cfg.Gateway.Fits; f != "" && !strings.Contains(pageText(t, b.file), "--out "+f) {
			t.Errorf("%s: gateway.fits names %s, which a reader who copies the block does not have: every decision would be a config_error (comment it out, saying where the file comes from)", at, f)
		}
	}
	if configs < 10 {
		t.Errorf("found %d configurations in the docs; the test reads fewer than it should", configs)
	}
}

// pageText is a page's text, by its path from the repository.
func pageText(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// whole says a block is a configuration to serve from: it names nodes or
// a chain.
func whole(top map[string]any) bool {
	_, nodes := top["nodes"]
	_, gw := top["gateway"]
	_, providers := top["providers"]
	return nodes || gw || providers
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// commandLine is a system1 command in a shell block: `system1 SUB ...`
// or `bin/system1 SUB ...`, after an optional prompt.
var commandLine = regexp.MustCompile(`^(?:\$ )?(?:[A-Z_]+=\S+ )*(?:bin/)?system1 ([a-z]+)(.*)$`)

// Every system1 command line in the docs' shell blocks names a command
// system1 has and only flags that command takes, as its own -h lists
// them: a copied line is never refused as usage. The lines that run
// offline do (the help texts).
func TestDocsCommandsParse(t *testing.T) {
	bin := testbin.Binary(t)
	help := map[string]string{}
	usage := func(sub string) string {
		if h, ok := help[sub]; ok {
			return h
		}
		cmd := exec.Command(bin, sub, "-h")
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		code, stdout, stderr, err := testbin.Run(cmd)
		if err != nil {
			t.Fatal(err)
		}
		h := stdout + stderr
		if code != 0 {
			h = "" // not a command: its -h is a usage error
		}
		help[sub] = h
		return h
	}
	flagRE := regexp.MustCompile(`(?:^|\s)(--?[a-z][a-z0-9-]*)`)
	n := 0
	for _, b := range append(blocks(t), indented(t)...) {
		if !slices.Contains([]string{"sh", "bash", "console", "shell", "", "indented"}, b.lang) {
			continue
		}
		// Continued lines are one command.
		text := strings.ReplaceAll(b.text, "\\\n", " ")
		for i, l := range strings.Split(text, "\n") {
			l, _, _ = strings.Cut(l, " #")
			m := commandLine.FindStringSubmatch(strings.TrimSpace(l))
			if m == nil {
				continue
			}
			n++
			at := fmt.Sprintf("%s:%d", b.file, b.line+i+1)
			h := usage(m[1])
			if h == "" {
				t.Errorf("%s: system1 has no command %q: %s", at, m[1], l)
				continue
			}
			// The flags before a quoted argument or a pipe are the
			// command's own.
			args := m[2]
			if j := strings.IndexAny(args, `'"|<>`); j >= 0 {
				args = args[:j]
			}
			for _, f := range flagRE.FindAllStringSubmatch(args, -1) {
				name := strings.TrimLeft(f[1], "-")
				if !regexp.MustCompile(`(?m)^\s*--?` + regexp.QuoteMeta(name) + `\b`).MatchString(h) {
					t.Errorf("%s: system1 %s takes no flag %s (its -h lists none): %s", at, m[1], f[1], l)
				}
			}
		}
	}
	if n < 5 {
		t.Errorf("found %d system1 command lines in the docs' shell blocks; the test reads fewer than it should", n)
	}
}

// transcript is a shell session shown in an indented block: the command
// after "$ " (its continued lines joined) and the output shown under it.
type transcript struct {
	at, command, output string
}

// transcripts are the indented "$ " sessions of every page.
func transcripts(t *testing.T) []transcript {
	t.Helper()
	var out []transcript
	for _, p := range pages(t) {
		lines := strings.Split(p.text, "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "    $ ") {
				continue
			}
			tr := transcript{at: fmt.Sprintf("%s:%d", p.file, i+1)}
			cmd := strings.TrimPrefix(lines[i], "    $ ")
			for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
				i++
				cmd = strings.TrimSuffix(cmd, "\\") + " " + strings.TrimSpace(lines[i])
			}
			tr.command = cmd
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    ") && !strings.HasPrefix(lines[i+1], "    $ ") {
				i++
				tr.output += strings.TrimPrefix(lines[i], "    ") + "\n"
			}
			out = append(out, tr)
		}
	}
	return out
}

// The sessions shown with `system1 mcp`, which asks no engine before a
// tool call and so runs anywhere, print what the page shows when run as
// copied, with the binary on the PATH and no configuration.
func TestDocsOfflineTranscriptsRun(t *testing.T) {
	bin := testbin.Binary(t)
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "system1")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tr := range transcripts(t) {
		if !strings.Contains(tr.command, "| system1 mcp") {
			continue
		}
		n++
		cmd := exec.Command("bash", "-c", tr.command)
		cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		code, stdout, stderr, err := testbin.Run(cmd)
		if err != nil || code != 0 || stdout != tr.output {
			t.Errorf("%s: %s\nexit %d %v, printed\n%s\nthe page shows\n%s%s", tr.at, tr.command, code, err, stdout, tr.output, stderr)
		}
	}
	if n == 0 {
		t.Error("found no system1 mcp session in the docs; the test reads fewer than it should")
	}
}

// Every `system1 toggle` the docs show inline (the pause switch of a
// pod, say) runs as copied: its flags before on, off or status, which
// toggle requires. The state folder it names is a temporary one here.
func TestDocsToggleCommandsRun(t *testing.T) {
	bin := testbin.Binary(t)
	span := regexp.MustCompile("`[^`\n]*\\bsystem1 toggle([^`\n]*)`")
	n := 0
	for _, p := range pages(t) {
		for _, m := range span.FindAllStringSubmatch(p.text, -1) {
			n++
			args := append([]string{"toggle"}, strings.Fields(m[1])...)
			if i := slices.Index(args, "--state-dir"); i >= 0 && i+1 < len(args) {
				args[i+1] = t.TempDir()
			}
			cmd := exec.Command(bin, args...)
			dir := t.TempDir()
			cmd.Env = []string{"HOME=" + dir, "XDG_STATE_HOME=" + dir, "PATH=" + os.Getenv("PATH")}
			code, stdout, stderr, err := testbin.Run(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if code != 0 {
				t.Errorf("%s: %s exits %d:\n%s%s", p.file, m[0], code, stdout, stderr)
			}
		}
	}
	if n == 0 {
		t.Error("found no `system1 toggle` in the docs")
	}
}

// Every decide result shown in the docs (a JSON block carrying
// "schema_version") is one the contract allows: schema/response.json,
// whose required fields are what a transcript recorded before a field was
// added would lack.
func TestDocsDecideResultsHoldTheSchema(t *testing.T) {
	schema, err := gateway.ResponseSchema().Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	shown := 0
	for _, b := range blocks(t) {
		if b.lang != "json" || !strings.Contains(b.text, `"schema_version"`) || !strings.Contains(b.text, `"request_id"`) {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(b.text), &v); err != nil {
			t.Errorf("%s:%d: %v", b.file, b.line, err)
			continue
		}
		if _, health := v["summary"]; health {
			continue // system1_health's result, not decide's
		}
		shown++
		if err := schema.Validate(any(v)); err != nil {
			t.Errorf("%s:%d: a decide result the contract does not allow: %v", b.file, b.line, err)
		}
	}
	if shown == 0 {
		t.Fatal("no decide result found in the docs; the test reads nothing")
	}
}
