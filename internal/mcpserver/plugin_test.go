package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// expand substitutes ${NAME} and ${NAME:-default} as Claude Code does in
// plugin files.
func expand(s string, vars map[string]string) string {
	return regexp.MustCompile(`\$\{([A-Z0-9_]+)(:-[^}]*)?\}`).ReplaceAllStringFunc(s, func(m string) string {
		sub := regexp.MustCompile(`\$\{([A-Z0-9_]+)(:-([^}]*))?\}`).FindStringSubmatch(m)
		if v, ok := vars[sub[1]]; ok {
			return v
		}
		return sub[3]
	})
}

// The repository is a Claude Code plugin named system1: its manifest, its
// MCP server started as the manifest's mcpServers says (through the
// launcher), and
// /system1:toggle, whose shell line pauses that same server, cannot be
// run by the model (disable-model-invocation).
func TestClaudeCodePlugin(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Name       string `json:"name"`
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	readJSON(t, filepath.Join(root, ".claude-plugin", "plugin.json"), &manifest)
	if manifest.Name != "system1" {
		t.Errorf("plugin name %q; /system1:toggle needs system1", manifest.Name)
	}
	var market struct {
		Plugins []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"plugins"`
	}
	readJSON(t, filepath.Join(root, ".claude-plugin", "marketplace.json"), &market)
	if len(market.Plugins) != 1 || market.Plugins[0].Name != "system1" || market.Plugins[0].Source != "./" {
		t.Errorf("marketplace.json does not list this repository as the plugin system1: %+v", market)
	}
	srv, ok := manifest.MCPServers["system1"]
	if !ok {
		t.Fatalf("plugin.json declares no system1 server: %+v", manifest)
	}

	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	vars := map[string]string{"CLAUDE_PLUGIN_ROOT": root, "CLAUDE_PLUGIN_DATA": w.stateDir, "SYSTEM1_CONFIG": w.config}
	// Start the server as Claude Code would, with the launcher running the
	// binary under test.
	cmd := exec.Command(expand(srv.Command, vars))
	for _, a := range srv.Args {
		cmd.Args = append(cmd.Args, expand(a, vars))
	}
	cmd.Env = append(w.env(), "SYSTEM1_BIN="+bin, "CLAUDE_PLUGIN_ROOT="+root)
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+expand(v, vars))
	}
	s := newClient(t, cmd)
	if res := s.decide(map[string]any{"question": "Ship it?"}); res.Status != gateway.Decided {
		t.Fatalf("plugin server: %+v", res)
	}

	toggle, err := os.ReadFile(filepath.Join(root, "commands", "toggle.md"))
	if err != nil {
		t.Fatal(err)
	}
	front, body, _ := strings.Cut(strings.TrimPrefix(string(toggle), "---\n"), "\n---\n")
	if !regexp.MustCompile(`(?m)^disable-model-invocation: true$`).MatchString(front) {
		t.Error("toggle.md lets the model invoke it")
	}
	line := regexp.MustCompile("!`([^`]+)`").FindStringSubmatch(body)
	if line == nil {
		t.Fatal("toggle.md runs no shell line")
	}
	allowed := regexp.MustCompile(`(?m)^allowed-tools: Bash\((.+):\*\)$`).FindStringSubmatch(front)
	run := func(args string) string {
		t.Helper()
		vars["ARGUMENTS"] = args
		shell := expand(line[1], vars)
		shell = strings.ReplaceAll(shell, "$ARGUMENTS", args)
		if allowed == nil || !strings.HasPrefix(shell, expand(allowed[1], vars)) {
			t.Errorf("allowed-tools %q does not cover %q", allowed, shell)
		}
		sh := exec.Command("sh", "-c", shell)
		sh.Env = append(w.env(), "SYSTEM1_BIN="+bin)
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", shell, err, out)
		}
		return string(out)
	}
	if out := run("off"); !strings.Contains(out, "OFF") {
		t.Errorf("/system1:toggle off printed %q", out)
	}
	if res := s.decide(map[string]any{"question": "Ship it?"}); res.Status != gateway.Abstained || !strings.Contains(res.Rationale, "paused") {
		t.Errorf("after /system1:toggle off: %+v", res)
	}
	if out := run(""); !strings.Contains(out, "OFF") {
		t.Errorf("/system1:toggle (status) printed %q", out)
	}
	run("on")
	if res := s.decide(map[string]any{"question": "Ship it?"}); res.Status != gateway.Decided {
		t.Errorf("after /system1:toggle on: %+v", res)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
