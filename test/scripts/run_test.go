package scripts

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// runGuard bounds a whole run of run.sh, which builds system1 first: a
// hang guard, not a timing check.
const runGuard = 6 * time.Minute

// run.sh takes its flags anywhere on the line, --help prints its usage
// (naming the configuration file the command line's hints name) and
// starts nothing, and a flag it does not know is a usage error before
// anything is built.
func TestRunUsage(t *testing.T) {
	code, out, errOut := script(t, isolated(t), "run.sh", "--help")
	if code != 0 || !strings.HasPrefix(out, "usage: scripts/run.sh [--once] [MODEL.gguf]") || !strings.Contains(out, "--once") {
		t.Errorf("run.sh --help: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if strings.Contains(errOut, "building system1") {
		t.Errorf("run.sh --help built system1:\n%s", errOut)
	}
	// The command line says where run.sh writes its configuration when
	// there is none; run.sh's usage must name the same file.
	bin := testbin.Binary(t)
	_, _, hint := command(t, []string{"HOME=" + t.TempDir(), "SYSTEM1_CONFIG=", "XDG_CONFIG_HOME="}, bin, "feedback", "req_1", "yes")
	_, file, ok := strings.Cut(hint, "scripts/run.sh writes one for the engine it starts: ")
	file, _, _ = strings.Cut(file, "\n")
	if !ok || !strings.HasPrefix(file, "~/") || !strings.Contains(out, file) {
		t.Errorf("system1 names %q as run.sh's configuration, which run.sh --help does not:\n%s\n---\n%s", file, hint, out)
	}

	for _, args := range [][]string{
		{"../shared/models/stories260K.gguf", "--bogus"},
		{"a.gguf", "b.gguf"},
	} {
		code, out, errOut := script(t, isolated(t), "run.sh", args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "usage: scripts/run.sh") || strings.Contains(errOut, "building system1") {
			t.Errorf("run.sh %s: exit %d (want 2)\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// run.sh MODEL --once stops after the first decision, --once after the
// model as before it. Each run writes the configuration of its engine
// to a file of its own port, in the current form (nodes and
// gateway.chain, no providers: that every command would warn about), so
// a second run.sh on other ports leaves the first one's file as it was.
func TestRunOnceWritesAConfigurationPerPort(t *testing.T) {
	server, model := engine(t)
	cache := filepath.Join(t.TempDir(), "cache")
	type run struct{ port, enginePort int }
	var runs []run
	for i, args := range [][]string{{model, "--once"}, {"--once", model}} {
		r := run{freePort(t), freePort(t)}
		runs = append(runs, r)
		env := []string{"SYSTEM1_CACHE=" + cache, "SYSTEM1_CONFIG=" + filepath.Join(cache, "no-config.yaml"), "SYSTEM1_MODEL=",
			"SYSTEM1_LLAMA_SERVER=" + server, "SYSTEM1_PORT=" + strconv.Itoa(r.port), "SYSTEM1_ENGINE_PORT=" + strconv.Itoa(r.enginePort)}
		code, out, errOut := scriptWithin(t, runGuard, env, "run.sh", args...)
		if code != 0 || !strings.Contains(out, `"department"`) {
			t.Fatalf("run %d, run.sh %s: exit %d\nstdout: %s\nstderr: %s", i, strings.Join(args, " "), code, out, errOut)
		}
		want := filepath.Join(cache, "run", "config-"+strconv.Itoa(r.port)+".yaml")
		if !strings.Contains(errOut, "wrote "+want) {
			t.Errorf("run %d does not say it wrote %s:\n%s", i, want, errOut)
		}
	}
	for i, r := range runs {
		path := filepath.Join(cache, "run", "config-"+strconv.Itoa(r.port)+".yaml")
		c, err := config.Load(path)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if len(c.Providers) > 0 {
			t.Errorf("run %d wrote the old providers: form:\n%s", i, readFile(t, path))
		}
		c.Normalize()
		if errs := c.Check(); len(errs) > 0 || c.OldForm {
			t.Errorf("run %d: %v, old form %v", i, errs, c.OldForm)
		}
		engineURL := "http://127.0.0.1:" + strconv.Itoa(r.enginePort)
		if len(c.Nodes) != 1 || c.Nodes[0].URL != engineURL || len(c.Gateway.Chain) != 1 || c.Listen != "127.0.0.1:"+strconv.Itoa(r.port) {
			t.Errorf("run %d's configuration is not its own engine's (%s):\n%s", i, engineURL, readFile(t, path))
		}
	}
}

// The test suite's smoke run (scripts/smoke.sh) passes while another
// run.sh serves on the ports the user gave it ($SYSTEM1_PORT and
// $SYSTEM1_ENGINE_PORT taken here), and leaves nothing in the cache.
func TestSmokeBesideAnotherRun(t *testing.T) {
	server, model := engine(t)
	held := []string{}
	for range 2 {
		l := listen(t)
		held = append(held, strconv.Itoa(l))
	}
	cache := filepath.Join(t.TempDir(), "cache")
	env := []string{"SYSTEM1_CACHE=" + cache, "SYSTEM1_LLAMA_SERVER=" + server, "SYSTEM1_PORT=" + held[0], "SYSTEM1_ENGINE_PORT=" + held[1]}
	code, out, errOut := scriptWithin(t, runGuard, env, "smoke.sh", model)
	if code != 0 || !strings.Contains(out, `"department"`) {
		t.Fatalf("smoke.sh beside a run on %v: exit %d\nstdout: %s\nstderr: %s", held, code, out, errOut)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("smoke.sh wrote into the user's cache %s", cache)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// With a configuration that lists nodes, run.sh serves those engines and
// shows its first decision on a model they serve: the configuration
// need not name jev-latest, which only configured aliases are (a 404
// there made run.sh stop the server it had just started, exit 1).
func TestRunOnceServesTheConfiguredNodes(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"qwen2.5:0.5b"}})
	t.Cleanup(f.Close)
	cache := filepath.Join(t.TempDir(), "cache")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "nodes:\n  - {name: llama, url: \"" + f.URL + "\", dialect: llamacpp, models: [qwen2.5:0.5b]}\n" +
		"gateway:\n  chain:\n    - {name: local, model: qwen2.5:0.5b}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"SYSTEM1_CACHE=" + cache, "SYSTEM1_CONFIG=" + cfg, "SYSTEM1_MODEL=", "SYSTEM1_LLAMA_SERVER=/bin/false",
		"XDG_STATE_HOME=" + t.TempDir(),
		"SYSTEM1_PORT=" + strconv.Itoa(freePort(t)), "SYSTEM1_ENGINE_PORT=" + strconv.Itoa(freePort(t))}
	code, out, errOut := scriptWithin(t, runGuard, env, "run.sh", "--once")
	if code != 0 || !strings.Contains(out, `"department"`) || !strings.Contains(errOut, "serving the engines configured in "+cfg) {
		t.Fatalf("run.sh --once over %s: exit %d\nstdout: %s\nstderr: %s", cfg, code, out, errOut)
	}
}

// run.sh over a configuration that turns auth on asks its first decision
// with SYSTEM1_KEY; without one it says how to ask and, with --once,
// fails saying so, where it asked without a key, got a 401 and stopped
// the server it started.
func TestRunOnceWithAuthOn(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"qwen2.5:0.5b"}})
	t.Cleanup(f.Close)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	yaml := "keys_env: RUN_TEST_KEYS\nnodes:\n  - {name: llama, url: \"" + f.URL + "\", dialect: llamacpp, models: [qwen2.5:0.5b]}\n" +
		"gateway:\n  chain:\n    - {name: local, model: qwen2.5:0.5b}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key string
		code      int
		out, err  string
	}{
		{"with a key", "k1", 0, `"department"`, "a first decision"},
		{"without one", "", 1, "", "turns auth on: set SYSTEM1_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"SYSTEM1_CACHE=" + filepath.Join(t.TempDir(), "cache"), "SYSTEM1_CONFIG=" + cfg, "SYSTEM1_MODEL=", "SYSTEM1_LLAMA_SERVER=/bin/false",
				"XDG_STATE_HOME=" + t.TempDir(), "RUN_TEST_KEYS=k1,k2", "SYSTEM1_KEY=" + tc.key,
				"SYSTEM1_PORT=" + strconv.Itoa(freePort(t)), "SYSTEM1_ENGINE_PORT=" + strconv.Itoa(freePort(t))}
			code, out, errOut := scriptWithin(t, runGuard, env, "run.sh", "--once")
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
				t.Fatalf("run.sh --once, SYSTEM1_KEY %q: exit %d\nstdout: %s\nstderr: %s", tc.key, code, out, errOut)
			}
		})
	}
}
