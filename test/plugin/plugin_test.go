// Package plugin tests the Claude Code plugin as a user meets it, with the
// real claude CLI from npm (test/claude): the validator, a marketplace
// install from a git repository on a machine whose Go build cache is
// empty, and the repository opened as a project.
package plugin

import (
	"bytes"
	"context"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// repoRoot is the checkout under test.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// claudeCLI returns the claude binary that `npm ci` in test/claude
// installed. scripts/test.sh sets SYSTEM1_REQUIRE_JS where npm exists, and
// then a missing CLI fails instead of skipping.
func claudeCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(repoRoot(t), "test", "claude", "node_modules", ".bin", "claude")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("SYSTEM1_REQUIRE_JS") != "" {
			t.Fatalf("the claude CLI is not installed (%v): run npm ci in test/claude", err)
		}
		t.Skipf("the claude CLI is not installed: run npm ci in test/claude (%v)", err)
	}
	return bin
}

// world is an isolated user: its own home and Claude Code configuration,
// and an empty Go build cache, as on a machine that never built system1.
type world struct {
	t      *testing.T
	claude string
	home   string
	env    []string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, claude: claudeCLI(t), home: t.TempDir()}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "GOPROXY", k == "GOFLAGS", k == "GONOSUMDB", k == "GOPRIVATE", k == "GOTOOLCHAIN", k == "TMPDIR", k == "LANG":
			w.env = append(w.env, kv)
		}
	}
	w.env = append(w.env,
		"HOME="+w.home,
		"CLAUDE_CONFIG_DIR="+filepath.Join(w.home, ".claude"),
		"XDG_CONFIG_HOME="+filepath.Join(w.home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(w.home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(w.home, ".local", "state"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		// The build cache starts empty; the modules come from the local
		// module cache so that the test needs no network.
		"GOCACHE="+t.TempDir(),
		"GOMODCACHE="+strings.TrimSpace(string(modcache)),
	)
	return w
}

// run runs the claude CLI in dir and returns what it printed.
func (w *world) run(dir string, args ...string) (string, error) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.claude, args...)
	cmd.Dir = dir
	cmd.Env = w.env
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (w *world) mustRun(dir string, args ...string) string {
	w.t.Helper()
	out, err := w.run(dir, args...)
	if err != nil {
		w.t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// The plugin passes Claude Code's own validator strictly, and the checks
// of the plugin directory (licence, icon, metadata) too.
func TestPluginValidates(t *testing.T) {
	w := newWorld(t)
	root := repoRoot(t)
	for _, args := range [][]string{
		{"plugin", "validate", root, "--strict"},
		{"plugin", "validate", root, "--profile", "directory", "--strict"},
	} {
		out, err := w.run(root, args...)
		if err != nil {
			t.Errorf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Inside the repository, as with the README's `claude --plugin-dir .`,
// Claude Code finds no project MCP server and no invalid settings: the
// server is declared in the plugin's manifest only, where
// ${CLAUDE_PLUGIN_ROOT} exists.
func TestRepositoryDeclaresNoProjectServer(t *testing.T) {
	w := newWorld(t)
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".mcp.json")); err == nil {
		t.Errorf("a root .mcp.json is loaded as a project server, where ${CLAUDE_PLUGIN_ROOT} does not exist")
	}
	if out := w.mustRun(root, "mcp", "list"); strings.Contains(out, "system1") {
		t.Errorf("claude mcp list in the repository shows a system1 server:\n%s", out)
	}
	out := w.mustRun(root, "doctor")
	if strings.Contains(out, "Invalid settings") || strings.Contains(out, "CLAUDE_PLUGIN_ROOT") {
		t.Errorf("claude doctor in the repository reports invalid settings:\n%s", out)
	}
	// With the README's --plugin-dir, the plugin's server is the only one
	// (here running a binary built for the test, through SYSTEM1_BIN).
	bin, err := testbin.Path()
	if err != nil {
		t.Fatal(err)
	}
	w.env = append(w.env, "SYSTEM1_BIN="+bin)
	out = w.mustRun(root, "--plugin-dir", root, "mcp", "list")
	servers := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "system1") {
			servers++
		}
	}
	if servers != 1 || !connected(out) {
		t.Errorf("claude --plugin-dir . mcp list does not show the plugin's server alone, connected:\n%s", out)
	}
}

// gitServer serves a snapshot of the working tree as a git repository
// over HTTP (git's own smart-HTTP backend), the way a user adds a
// marketplace by URL, and returns its URL.
func gitServer(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	src := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		info, err := os.Lstat(filepath.Join(root, f))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	served := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git(src, "init", "-q", "-b", "main")
	git(src, "add", "-A")
	git(src, "commit", "-q", "-m", "snapshot")
	git(served, "clone", "-q", "--bare", src, "system1.git")
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	srv := httptest.NewServer(&cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + served, "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(srv.Close)
	return srv.URL + "/system1.git"
}

// connected reports whether `claude mcp list` shows the plugin's server
// connected.
func connected(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "plugin:system1:system1:") && strings.Contains(line, "✔ Connected") {
			return true
		}
	}
	return false
}

// launcher starts the installed plugin's MCP server as Claude Code does
// (the manifest's command, with the plugin's folders in the environment)
// and returns an MCP session with it.
func launcher(t *testing.T, w *world, root, data string, extra ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "scripts", "system1-plugin"), "mcp")
	cmd.Env = append(append(w.env, "CLAUDE_PLUGIN_ROOT="+root, "CLAUDE_PLUGIN_DATA="+data), extra...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "plugin-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to the plugin's server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stopBuild kills a background build the test leaves behind (it runs in a
// session of its own, whose id is the pid in the lock).
func stopBuild(data string) {
	b, err := os.ReadFile(filepath.Join(data, "build.lock", "pid"))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(filepath.Join(data, "build.lock")); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A marketplace install from a git repository, on a machine whose Go
// build cache is empty, reaches a connected server in `claude mcp list`
// under Claude Code's default 30 s start limit (no MCP_TIMEOUT): the
// launcher starts the build in the background and serves a stand-in
// whose tools say that System 1 is being built and what to do. The build
// outlives the session that started it, and the next session gets the
// real server.
func TestMarketplaceInstallWithColdGoCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds system1 with an empty Go cache")
	}
	w := newWorld(t)
	url := gitServer(t)
	project := t.TempDir()
	w.mustRun(project, "plugin", "marketplace", "add", url)
	w.mustRun(project, "plugin", "install", "system1@system1")
	root := filepath.Join(w.home, ".claude", "plugins", "cache", "system1", "system1", "0.1.0")
	data := filepath.Join(w.home, ".claude", "plugins", "data", "system1-system1")
	if _, err := os.Stat(filepath.Join(root, "scripts", "system1-plugin")); err != nil {
		t.Fatalf("the installed plugin is not where Claude Code puts it: %v", err)
	}
	t.Cleanup(func() { stopBuild(data) })

	start := time.Now()
	out := w.mustRun(project, "mcp", "list")
	t.Logf("first claude mcp list (cold Go cache) took %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	if !connected(out) {
		t.Fatalf("the plugin's server is not connected in the first session after install:\n%s", out)
	}

	// What the first session's model sees: the three tools, and a call
	// that says what is going on and what to do.
	s := launcher(t, w, root, data, "SYSTEM1_PLUGIN_WAIT=0")
	if v := s.InitializeResult().ServerInfo.Version; v != "not-built-yet" {
		t.Fatalf("a cold start served %q, not the stand-in: was the Go cache empty?", v)
	}
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "system1_decide,system1_health,system1_capabilities" {
		t.Errorf("the stand-in lists %v", names)
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "system1_decide", Arguments: map[string]any{"question": "Ship it?"}})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	if len(res.Content) == 1 {
		if c, ok := res.Content[0].(*mcp.TextContent); ok {
			text = c.Text
		}
	}
	if !res.IsError || !strings.Contains(text, "System 1 is being built") || !strings.Contains(text, "/mcp") {
		t.Errorf("a call while building does not say what to do: isError %v, %q", res.IsError, text)
	}
	s.Close()

	// The build runs on after the sessions that started it ended.
	deadline := time.Now().Add(15 * time.Minute)
	var bin []byte
	for {
		where := exec.Command(filepath.Join(root, "scripts", "system1-plugin"), "where")
		where.Env = append(w.env, "CLAUDE_PLUGIN_ROOT="+root, "CLAUDE_PLUGIN_DATA="+data)
		var stderr bytes.Buffer
		where.Stderr = &stderr
		if bin, err = where.Output(); err == nil {
			break
		}
		if log, _ := os.ReadFile(filepath.Join(data, "build.log")); bytes.Contains(log, []byte("the build failed")) {
			t.Fatalf("the background build failed:\n%s", log)
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(data, "build.log"))
			t.Fatalf("no binary after 15 minutes (%s):\n%s", stderr.String(), log)
		}
		time.Sleep(time.Second)
	}
	t.Logf("background build done %v after the first session started: %s", time.Since(start).Round(time.Second), strings.TrimSpace(string(bin)))

	out = w.mustRun(project, "mcp", "list")
	if !connected(out) {
		t.Fatalf("the built server is not connected:\n%s", out)
	}
	s = launcher(t, w, root, data)
	if v := s.InitializeResult().ServerInfo.Version; v == "not-built-yet" {
		t.Errorf("the session after the build still got the stand-in")
	}
	tools, err = s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) == 0 || tools.Tools[0].OutputSchema == nil {
		t.Errorf("the real server's tools carry no output schema: %+v", tools.Tools)
	}
}

// The stand-in server speaks MCP to any client (here the Go SDK's) and
// says, at each call, what is going on and what to do: Go missing, the
// build failed (with its log), being built, and built once the binary
// appears, which needs only a reconnect.
func TestStandInServer(t *testing.T) {
	dir := t.TempDir()
	bin, logFile, failed := filepath.Join(dir, "system1"), filepath.Join(dir, "build.log"), filepath.Join(dir, "build-failed")
	call := func(status string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(repoRoot(t), "scripts", "system1-building"), status, bin, logFile, failed)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", status, err)
		}
		defer s.Close()
		if err := s.Ping(ctx, nil); err != nil {
			t.Errorf("%s: ping: %v", status, err)
		}
		tools, err := s.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) != 3 {
			t.Fatalf("%s: tools/list: %v %+v", status, err, tools)
		}
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "system1_health", Arguments: map[string]any{"id": 7, "method": "x"}})
		if err != nil || !res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: tools/call: %v %+v", status, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	for _, tc := range []struct {
		status, setup string
		want          []string
	}{
		{"nogo", "", []string{"Go is not installed", "https://go.dev/dl", "SYSTEM1_BIN"}},
		{"building", "", []string{"System 1 is being built", logFile, "/mcp"}},
		{"building", "failed", []string{"could not be built", logFile, "/mcp"}},
		{"building", "built", []string{"System 1 is built now", "/mcp", "reconnect"}},
	} {
		switch tc.setup {
		case "failed":
			os.WriteFile(failed, []byte("the build failed\n"), 0o644)
		case "built":
			os.Remove(failed)
			os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
		}
		text := call(tc.status)
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s/%s: %q does not say %q", tc.status, tc.setup, text, w)
			}
		}
	}
}
