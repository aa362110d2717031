// Package testengine starts a real llama-server for tests: llama.cpp's
// server built by scripts/llama-server.sh, serving the shared tiny model.
// Tests that need it skip with the reason when either is missing, unless
// SYSTEM1_REQUIRE_ENGINE is set (CI sets it), where a missing engine fails.
package testengine

import (
	"bytes"
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/testbin"
)

// Model is the alias the tiny model is served under.
const Model = "stories260k"

// Binary returns the llama-server binary: $SYSTEM1_LLAMA_SERVER, else the
// one scripts/llama-server.sh caches.
func Binary() string {
	if b := os.Getenv("SYSTEM1_LLAMA_SERVER"); b != "" {
		return b
	}
	cache := os.Getenv("SYSTEM1_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "system1")
	}
	return filepath.Join(cache, "llama-server-80fb11a", "llama-server")
}

// ModelPath returns the GGUF to serve: $SYSTEM1_TEST_MODEL, else
// ../shared/models/stories260K.gguf beside the repository.
func ModelPath() string {
	if m := os.Getenv("SYSTEM1_TEST_MODEL"); m != "" {
		return m
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models", "stories260K.gguf")
}

// SharedData returns a case file of ../shared/data beside the repository
// ($SYSTEM1_DATA names another folder); the test skips when it is not there.
func SharedData(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("SYSTEM1_DATA")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "data")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared case files unavailable: %v", err)
	}
	return path
}

// unavailable skips t saying what the engine lacks, or fails it where
// SYSTEM1_REQUIRE_ENGINE is set (CI sets it).
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("SYSTEM1_REQUIRE_ENGINE") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// Server is a running llama-server.
type Server struct {
	URL string
	cmd *exec.Cmd
	cfg Config
}

// Config says how StartWith runs llama-server.
type Config struct {
	// Model is the GGUF to serve; "" is ModelPath().
	Model string
	// Alias is the name the model is served under; "" is Model (the
	// package's constant).
	Alias string
	// Slots is the number of parallel slots (-np); 0 is 1.
	Slots int
	// Ctx is each slot's context in tokens; 0 is the tiny model's 2048.
	Ctx int
}

// Start runs llama-server on a free loopback port until the test ends, with
// the given number of parallel slots, each with the tiny model's trained
// context of 2048 tokens.
func Start(t testing.TB, slots int) *Server {
	t.Helper()
	return StartWith(t, Config{Slots: slots})
}

// StartWith runs llama-server as cfg says on a free loopback port until
// the test ends. It skips the test when the binary or the model is
// missing, unless SYSTEM1_REQUIRE_ENGINE is set.
func StartWith(t testing.TB, cfg Config) *Server {
	t.Helper()
	cfg.Model = cmp.Or(cfg.Model, ModelPath())
	cfg.Alias = cmp.Or(cfg.Alias, Model)
	cfg.Slots, cfg.Ctx = max(cfg.Slots, 1), cmp.Or(cfg.Ctx, 2048)
	for _, f := range []string{Binary(), cfg.Model} {
		if _, err := os.Stat(f); err != nil {
			unavailable(t, "real engine unavailable: %v (build it with scripts/llama-server.sh; the model comes from ../shared/models)", err)
		}
	}
	s := &Server{URL: "http://" + testbin.LoopbackAddr(t), cfg: cfg}
	t.Cleanup(s.Stop)
	s.run(t)
	return s
}

// Restart stops the server and starts it again on the same port as cfg
// says, its zero fields keeping the running values: a model swapped, or
// the server reconfigured, under a client that keeps its URL.
func (s *Server) Restart(t testing.TB, cfg Config) {
	t.Helper()
	s.Stop()
	s.cfg.Model = cmp.Or(cfg.Model, s.cfg.Model)
	s.cfg.Alias = cmp.Or(cfg.Alias, s.cfg.Alias)
	s.cfg.Slots = cmp.Or(cfg.Slots, s.cfg.Slots)
	s.cfg.Ctx = cmp.Or(cfg.Ctx, s.cfg.Ctx)
	s.run(t)
}

// run starts the server as s.cfg says on s.URL's port and waits until it
// is healthy.
func (s *Server) run(t testing.TB) {
	t.Helper()
	cfg := s.cfg
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]
	logf, err := os.CreateTemp(t.TempDir(), "llama-server-*.log")
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(Binary(), "-m", cfg.Model, "--host", "127.0.0.1", "--port", port,
		"-c", strconv.Itoa(cfg.Ctx*cfg.Slots), "-np", strconv.Itoa(cfg.Slots), "-t", "2", "-a", cfg.Alias, "--no-webui", "--metrics")
	launch(t, "llama-server", s.cmd, logf, s.URL+"/health")
}

// launch starts cmd, its output going to logf, and waits until GET url
// answers 200; where it does not, it fails t quoting the log.
func launch(t testing.TB, name string, cmd *exec.Cmd, logf *os.File, url string) {
	t.Helper()
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Args[0], err)
	}
	if err := testbin.WaitOK(url, nil, time.Minute); err != nil {
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("%s: %v:\n%s", name, err, log)
	}
}

// PromptTokens is how many prompt tokens the server has evaluated since it
// started (llama-server's llamacpp:prompt_tokens_total): what a test of
// prompt caching counts.
func (s *Server) PromptTokens(t testing.TB) int {
	t.Helper()
	m, err := testbin.Metrics(s.URL)
	if err != nil {
		t.Fatalf("llama-server's metrics: %v", err)
	}
	n, ok := m["llamacpp:prompt_tokens_total"]
	if !ok {
		t.Fatalf("llama-server's metrics have no llamacpp:prompt_tokens_total: %v", m)
	}
	return int(n)
}

// Stop kills the server and waits for it; stopping twice is fine.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.ProcessState != nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// RandomModels returns tiny random-weight GGUFs of one shape, one per
// seed, written and cached by scripts/random-gguf.sh: two seeds are two
// builds with the same name, shape and metadata. It skips the test when
// they cannot be made (no llama-server build, no python3-numpy), unless
// SYSTEM1_REQUIRE_ENGINE is set.
func RandomModels(t testing.TB, seeds ...int) []string {
	t.Helper()
	args := make([]string, len(seeds))
	for i, s := range seeds {
		args[i] = strconv.Itoa(s)
	}
	return ggufs(t, args...)
}

// RandomQ8 returns the random-weight model of seed re-quantized to Q8_0
// by gguf-py's quantizer, written and cached by scripts/random-gguf.sh:
// the same weights as RandomModels' seed in another precision, under the
// same metadata but the file type. It skips as RandomModels does.
func RandomQ8(t testing.TB, seed int) string {
	t.Helper()
	return ggufs(t, strconv.Itoa(seed)+"-q8_0")[0]
}

// StoriesF16 returns the tiny model with its matrices in F16, written and
// cached by scripts/random-gguf.sh: the same model as another build, as a
// re-quantized one is. It skips as RandomModels does.
func StoriesF16(t testing.TB) string {
	t.Helper()
	return ggufs(t, "stories-f16")[0]
}

func ggufs(t testing.TB, args ...string) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "random-gguf.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		unavailable(t, "test models unavailable: %v\n%s", err, stderr.Bytes())
	}
	paths := strings.Fields(string(out))
	if len(paths) != len(args) {
		t.Fatalf("%s printed %d paths for %d models: %q", script, len(paths), len(args), out)
	}
	return paths
}
