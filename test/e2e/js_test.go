// Package e2e tests system1 as its users run it: the built binary, started
// with system1 serve, reached by real clients.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
	"system1/internal/testengine"
)

// The official JS SDK (test/js, @typesafe-ai/sdk pinned at 0.6.0) lists
// the models of a running system1 and asks it a choice, a noul and a
// score, with nothing changed but TYPESAFE_BASE_URL and the key; it also
// gets the SDK's own error classes for a wrong key and a refused request.
// The engine is the real llama-server with the tiny model when it is
// here, else the fake engine, whose numbers the script then checks
// exactly.
func TestJSClient(t *testing.T) {
	js := jsProject(t, "js", "@typesafe-ai/sdk")
	bin := testbin.Binary(t)
	model, url, expect := startEngine(t)
	const key = "e2e-key"
	cfg := filepath.Join(t.TempDir(), "system1.yaml")
	writeFile(t, cfg, fmt.Sprintf(`keys: [%s]
aliases:
  jev-latest: %s
nodes:
  - name: engine
    url: %s
    dialect: llamacpp
    models: [%s]
`, key, model, url, model))
	base := serve(t, bin, cfg)

	out, err := js.test(t, 2*time.Minute, append(env("TYPESAFE_"), "TYPESAFE_BASE_URL="+base, "TYPESAFE_API_KEY="+key, "SYSTEM1_EXPECT="+expect), "sdk.test.mjs")
	if err != nil {
		t.Fatalf("the JS SDK test failed: %v", err)
	}
	if !bytes.Contains(out, []byte("# pass 5")) || !bytes.Contains(out, []byte("# fail 0")) {
		t.Fatal("node --test did not report 5 passing tests and no failures")
	}
}

// nodeProject is a JS project of test/ to run with node --test.
type nodeProject struct{ node, dir string }

// jsProject is the project test/<name>, whose dependencies (pkg among
// them) npm ci installed; it skips (skipJS) when node or they are
// missing.
func jsProject(t *testing.T, name, pkg string) nodeProject {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipJS(t, "node is not installed")
	}
	dir, err := filepath.Abs(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
		skipJS(t, fmt.Sprintf("test/%s/node_modules is missing: run npm ci in test/%s", name, name))
	}
	return nodeProject{node, dir}
}

// test runs node --test with args in the project, for at most limit, with
// env as its environment, and returns its output, which it logs.
func (p nodeProject) test(t *testing.T, limit time.Duration, env []string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.node, append([]string{"--test"}, args...)...)
	cmd.Dir = p.dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("node --test %s:\n%s", strings.Join(args, " "), out)
	return out, err
}

// skipJS skips for a missing JS toolchain, unless SYSTEM1_REQUIRE_JS is
// set (CI sets it after npm ci), where it fails.
func skipJS(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("SYSTEM1_REQUIRE_JS") != "" {
		t.Fatalf("%s, and SYSTEM1_REQUIRE_JS is set", why)
	}
	t.Skip(why)
}

// startEngine starts the real llama-server when its binary and the tiny
// model are here (or SYSTEM1_REQUIRE_ENGINE demands it), else the fake
// engine. It returns the model, the engine's URL, and what the JS test
// may expect of the numbers.
func startEngine(t *testing.T) (model, url, expect string) {
	t.Helper()
	var missing []string
	for _, f := range []string{testengine.Binary(), testengine.ModelPath()} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, err.Error())
		}
	}
	if len(missing) == 0 || os.Getenv("SYSTEM1_REQUIRE_ENGINE") != "" {
		srv := testengine.Start(t, 2)
		return testengine.Model, srv.URL, "shape"
	}
	t.Logf("real engine unavailable (%s); using the fake engine", strings.Join(missing, "; "))
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	return fakeengine.DefaultModel, f.URL, "exact"
}

// serve starts system1 serve on a free loopback port and returns its URL
// once its /health answers. The process is interrupted and waited for
// when the test ends; its log is shown if the test failed.
func serve(t *testing.T, bin, cfg string) string {
	t.Helper()
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, withoutCanary(string(raw)))
	state := t.TempDir()
	addr := testbin.LoopbackAddr(t)
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", addr)
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+state, "XDG_CONFIG_HOME="+state)
	log := &testbin.Output{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select { // serve drains for at most its drain timeout
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("system1 serve log:\n%s", log)
		}
	})
	url := "http://" + addr
	if err := testbin.WaitHealthy(url, exited, 30*time.Second); err != nil {
		t.Fatalf("system1 serve: %v", err)
	}
	return url
}

// env is the environment without the variables that start with any of
// the prefixes, so that the caller's settings do not leak into a test.
func env(drop ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range drop {
			keep = keep && !strings.HasPrefix(kv, p)
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
