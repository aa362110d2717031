// Package plugin tests the Claude Code plugin as a user meets it, with the
// real claude CLI from npm (test/claude): the validator, a marketplace
// install from a git repository on a machine whose Go build cache is
// empty, and the repository opened as a project.
package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/mcpserver"
	"system1/internal/testbin"
)

func TestMain(m *testing.M) {
	testbin.Main(m)
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

// cli is one Claude Code CLI that `npm ci` in test/claude installed.
type cli struct {
	version string // the version test/claude/package.json pins
	path    string // its binary
}

// claudeCLIs returns every Claude Code CLI test/claude/package.json pins:
// @anthropic-ai/claude-code itself (the current one, first) and each npm
// alias of it (an older one that many installs still run). Their
// binaries are named by path, not node_modules/.bin/claude, which only one
// of them can own. scripts/test.sh sets SYSTEM1_REQUIRE_JS where npm
// exists, and then a missing CLI fails instead of skipping.
func claudeCLIs(t *testing.T) []cli {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "test", "claude")
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	readJSON(t, filepath.Join(dir, "package.json"), &pkg)
	const name = "@anthropic-ai/claude-code"
	var clis []cli
	for dep, spec := range pkg.DevDependencies {
		version, alias := strings.CutPrefix(spec, "npm:"+name+"@")
		if dep != name && !alias {
			continue
		}
		var bin struct {
			Bin map[string]string `json:"bin"`
		}
		manifest := filepath.Join(dir, "node_modules", dep, "package.json")
		if _, err := os.Stat(manifest); err != nil {
			if os.Getenv("SYSTEM1_REQUIRE_JS") != "" {
				t.Fatalf("the claude CLI %s is not installed (%v): run npm ci in test/claude", spec, err)
			}
			t.Skipf("the claude CLI %s is not installed: run npm ci in test/claude (%v)", spec, err)
		}
		readJSON(t, manifest, &bin)
		c := cli{version: version, path: filepath.Join(dir, "node_modules", dep, bin.Bin["claude"])}
		if dep == name {
			clis = append([]cli{c}, clis...)
		} else {
			clis = append(clis, c)
		}
	}
	if len(clis) == 0 || clis[0].version != pkg.DevDependencies[name] {
		t.Fatalf("test/claude/package.json pins no %s: %v", name, pkg.DevDependencies)
	}
	return clis
}

// claudeCLI returns the current Claude Code CLI.
func claudeCLI(t *testing.T) string {
	t.Helper()
	return claudeCLIs(t)[0].path
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
	return newWorldWith(t, claudeCLI(t))
}

// newWorldWith is newWorld with the claude CLI at path.
func newWorldWith(t *testing.T, path string) *world {
	t.Helper()
	w := &world{t: t, claude: path, home: t.TempDir()}
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

// The plugin passes Claude Code's own validator strictly, on every CLI
// version test/claude pins (the current one and an older one that many
// installs still run, which refuses fields it does not know, such as the
// manifest's "icon"), and, where the CLI has them, the checks of the
// plugin directory (licence, icon, metadata) too. docs/plugin.md names
// the versions checked.
func TestPluginValidates(t *testing.T) {
	root := repoRoot(t)
	docs, err := os.ReadFile(filepath.Join(root, "docs", "plugin.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, said, _ := strings.Cut(string(docs), "passes `claude plugin validate --strict` on ")
	said, _, _ = strings.Cut(said, ";")
	for i, c := range claudeCLIs(t) {
		if !strings.Contains(said, "Claude Code "+c.version) && !strings.Contains(said, "on "+c.version) {
			t.Errorf("docs/plugin.md does not say that the plugin is checked on Claude Code %s: %q", c.version, said)
		}
		t.Run(c.version, func(t *testing.T) {
			w := newWorldWith(t, c.path)
			if out := w.mustRun(root, "--version"); !strings.HasPrefix(out, c.version+" ") {
				t.Fatalf("%s is %q, not %s", c.path, out, c.version)
			}
			runs := [][]string{{"plugin", "validate", root, "--strict"}}
			if help := w.mustRun(root, "plugin", "validate", "--help"); strings.Contains(help, "--profile") {
				runs = append(runs, []string{"plugin", "validate", root, "--profile", "directory", "--strict"})
			} else if i == 0 {
				t.Errorf("the current CLI has no plugin validate --profile:\n%s", help)
			}
			for _, args := range runs {
				out, err := w.run(root, args...)
				if err != nil {
					t.Errorf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
		})
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
	bin := testbin.Binary(t)
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

	// What the first session's model sees: the real server's tools, and a
	// call that says what is going on (since when, the log's last line)
	// and what to do.
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
	if !slices.Equal(names, mcpserver.Tools) {
		t.Errorf("the stand-in lists %v; the server lists %v", names, mcpserver.Tools)
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
	if !res.IsError || !strings.Contains(text, "System 1 is being built") || !strings.Contains(text, "/mcp") ||
		!regexp.MustCompile(`The build started [0-9].* ago; the last line of its log \(.*build\.log\) is: "`).MatchString(text) {
		t.Errorf("a call while building does not say what is going on and what to do: isError %v, %q", res.IsError, text)
	}
	t.Logf("the stand-in said: %s", text)
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

// The stand-in server speaks MCP to any client (here the Go SDK's),
// lists the real server's tools, and says, at each call, what is true and
// what to do: Go missing; being built, since when, with the build log's
// last line (whatever bytes it holds); the build failed; the builder gone
// before it finished; built once the binary appears, which needs only a
// reconnect.
func TestStandInServer(t *testing.T) {
	dir := t.TempDir()
	bin, logFile, failed := filepath.Join(dir, "system1"), filepath.Join(dir, "build.log"), filepath.Join(dir, "build-failed")
	started, lock := filepath.Join(dir, "build.started"), filepath.Join(dir, "build.lock")
	call := func(status string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(repoRoot(t), "scripts", "system1-building"), status, bin, logFile, failed, started, lock)
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
		if err != nil {
			t.Fatalf("%s: tools/list: %v", status, err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		if !slices.Equal(names, mcpserver.Tools) {
			t.Errorf("%s: the stand-in lists %v; the server lists %v", status, names, mcpserver.Tools)
		}
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolHealth, Arguments: map[string]any{"id": 7, "method": "x"}})
		if err != nil || !res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: tools/call: %v %+v", status, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A builder that is gone: a process that has exited.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		status, setup string
		want          []string
	}{
		{"nogo", "", []string{"Go is not installed", "https://go.dev/dl", "SYSTEM1_BIN"}},
		{"building", "starting", []string{"System 1 is being built", "The build is just starting", logFile, "still empty", "/mcp", "system1-plugin: built"}},
		{"building", "running", []string{"System 1 is being built", "The build started 2 h 5 min ago", logFile, `"github.com/jackc/pgx/v5/pgtype"`, "/mcp"}},
		{"building", "odd bytes", []string{"System 1 is being built", `"tab?quote" back\slash ?? cr"`}},
		{"building", "stopped", []string{"stopped before it finished", "process is gone", "The build started 2 h 5 min ago", "/mcp", "starts the build again"}},
		{"building", "failed", []string{"could not be built", logFile, `"system1-plugin: the build failed"`, "/mcp"}},
		{"building", "built", []string{"System 1 is built now", "/mcp", "reconnect"}},
	} {
		switch tc.setup {
		case "running":
			// The build holds the lock with a live process (this one),
			// started 2 h 5 min ago, and has got as far as a package.
			write(started, strconv.FormatInt(time.Now().Add(-2*time.Hour-5*time.Minute).Unix(), 10)+"\n")
			os.Mkdir(lock, 0o755)
			write(filepath.Join(lock, "pid"), strconv.Itoa(os.Getpid())+"\n")
			write(logFile, "system1-plugin: building "+bin+"\ngithub.com/jackc/pgx/v5\ngithub.com/jackc/pgx/v5/pgtype\n")
		case "odd bytes":
			write(logFile, "first\n\"tab\tquote\" back\\slash \xff\xfe cr\"\r\n")
		case "stopped":
			write(logFile, "system1-plugin: building "+bin+"\ngithub.com/jackc/pgx/v5/pgtype\n")
			write(filepath.Join(lock, "pid"), strconv.Itoa(dead.Process.Pid)+"\n")
		case "failed":
			os.RemoveAll(lock)
			write(logFile, "cmd/system1/main.go:1:1: expected 'package'\nsystem1-plugin: the build failed\n")
			write(failed, "system1-plugin: the build failed\n")
		case "built":
			os.Remove(failed)
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		text := call(tc.status)
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s/%s: %q does not say %q", tc.status, tc.setup, text, w)
			}
		}
	}
}

// SYSTEM1_PLUGIN_WAIT that is not a whole number of seconds (2.5, 10s)
// is read as the default, with a line on stderr, and the launcher still
// serves: where the shell's arithmetic on it ended the launcher before
// it served anything, and Claude Code showed the server failed.
func TestLauncherWaitNotAWholeNumber(t *testing.T) {
	root, data := t.TempDir(), t.TempDir()
	src := repoRoot(t)
	for _, dir := range []string{"scripts", "cmd", "internal"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"system1-plugin", "system1-building"} {
		b, err := os.ReadFile(filepath.Join(src, "scripts", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "scripts", name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A source that fails to build at once: the launcher waits, then
	// serves the stand-in, which says so.
	for _, name := range []string{"go.mod", "go.sum"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("module broken\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { stopBuild(data) })
	for _, wait := range []string{"2.5", "10s"} {
		cmd := exec.Command(filepath.Join(root, "scripts", "system1-plugin"), "mcp")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GOCACHE=" + t.TempDir(), "GOFLAGS=-mod=mod",
			"CLAUDE_PLUGIN_ROOT=" + root, "CLAUDE_PLUGIN_DATA=" + data, "SYSTEM1_PLUGIN_WAIT=" + wait}
		stderr := &testbin.Output{}
		cmd.Stderr = stderr
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s, err := mcp.NewClient(&mcp.Implementation{Name: "plugin-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		cancel()
		if err != nil {
			t.Errorf("SYSTEM1_PLUGIN_WAIT=%s: connect: %v\nstderr:\n%s", wait, err, stderr)
			continue
		}
		if v := s.InitializeResult().ServerInfo.Version; v != "not-built-yet" {
			t.Errorf("SYSTEM1_PLUGIN_WAIT=%s: server version %q; want the stand-in", wait, v)
		}
		s.Close()
		if !strings.Contains(stderr.String(), "SYSTEM1_PLUGIN_WAIT") {
			t.Errorf("SYSTEM1_PLUGIN_WAIT=%s: nothing on stderr says it was not read:\n%s", wait, stderr)
		}
	}
}
