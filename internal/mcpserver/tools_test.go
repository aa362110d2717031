package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"system1/internal/mcpserver"
)

// toolName is how a tool name looks in prose and code: system1_ and a
// lower-case word or two.
var toolName = regexp.MustCompile("`?(system1_[a-z_]*[a-z])`?")

// names lists the tool names in text once each, in the order they first
// appear.
func names(text string) []string {
	var out []string
	for _, m := range toolName.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// span is the text of path from the first match of start to the first
// match of end after it.
func span(t *testing.T, path, start, end string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := regexp.MustCompile(start).FindStringIndex(text)
	if i == nil {
		t.Fatalf("%s: no %q", path, start)
	}
	rest := text[i[0]:]
	j := regexp.MustCompile(end).FindStringIndex(rest[i[1]-i[0]:])
	if j == nil {
		t.Fatalf("%s: no %q after %q", path, end, start)
	}
	return rest[:i[1]-i[0]+j[0]]
}

// The tool names live in mcpserver.Tools; every other place that names
// the tools (the real server's list and system1_capabilities are checked
// by TestStartupContactsNoProvider and TestCapabilities) names exactly
// those, in that order: the plugin's manifest and marketplace entry, the
// stand-in server the launcher runs while System 1 builds,
// docs/plugin.md's table and the README's lines about the MCP face.
func TestToolNamesHaveOneHome(t *testing.T) {
	root := filepath.Join("..", "..")
	var manifest struct {
		Description string `json:"description"`
	}
	readJSON(t, filepath.Join(root, ".claude-plugin", "plugin.json"), &manifest)
	var market struct {
		Plugins []struct {
			Description string `json:"description"`
		} `json:"plugins"`
	}
	readJSON(t, filepath.Join(root, ".claude-plugin", "marketplace.json"), &market)
	if len(market.Plugins) != 1 {
		t.Fatalf("marketplace.json lists %d plugins", len(market.Plugins))
	}
	readme, docs := filepath.Join(root, "README.md"), filepath.Join(root, "docs", "plugin.md")
	places := map[string]string{
		"plugin.json's description":       manifest.Description,
		"marketplace.json's description":  market.Plugins[0].Description,
		"the README's MCP face":           span(t, readme, `(?m)^- \*\*MCP\*\*`, `(?m)^- \*\*`),
		"docs/plugin.md's table of tools": span(t, docs, `(?m)^\| \x60system1_`, `(?m)^\| \x60/system1:toggle`),
		"the stand-in server's tools":     strings.Join(standInTools(t, root), " "),
	}
	for place, text := range places {
		if got := names(text); !slices.Equal(got, mcpserver.Tools) {
			t.Errorf("%s names %v; mcpserver.Tools is %v", place, got, mcpserver.Tools)
		}
	}
}

// standInTools lists the tools of scripts/system1-building (the launcher's
// stand-in while Go is missing here) through the Go SDK's client.
func standInTools(t *testing.T, root string) []string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "system1-building"), "nogo",
		filepath.Join(dir, "system1"), filepath.Join(dir, "build.log"), filepath.Join(dir, "build-failed"),
		filepath.Join(dir, "build.started"), filepath.Join(dir, "build.lock"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := newSDKClient().Connect(ctx, commandTransport(cmd), nil)
	if err != nil {
		t.Fatalf("the stand-in server: %v", err)
	}
	defer s.Close()
	res, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("the stand-in's tools/list: %v", err)
	}
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	return out
}

// docs/plugin.md quotes system1_decide's description as the agent sees
// it: the quote is the description the server lists, word for word.
func TestPluginDocQuotesDecideDescription(t *testing.T) {
	s := newWorld(t, "").start()
	defer s.close()
	var listed string
	for _, tool := range s.listTools() {
		if tool.Name == mcpserver.ToolDecide {
			listed = tool.Description
		}
	}
	doc := filepath.Join("..", "..", "docs", "plugin.md")
	quote := span(t, doc, "This is the description of `system1_decide`:\n\n> ", "\n")
	quote = quote[strings.Index(quote, "\n> ")+len("\n> "):]
	if quote != listed {
		t.Errorf("docs/plugin.md quotes system1_decide's description as\n%s\nbut the server lists\n%s", quote, listed)
	}
}
