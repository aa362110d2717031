// Package testengine starts a real llama-server for tests: llama.cpp's
// server built by scripts/llama-server.sh, serving the shared tiny model.
// Tests that need it skip with the reason when either is missing, unless
// SYSTEM1_REQUIRE_ENGINE is set (CI sets it), where a missing engine fails.
package testengine

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
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

// Server is a running llama-server.
type Server struct {
	URL string
	cmd *exec.Cmd
}

// Start runs llama-server on a free loopback port until the test ends, with
// the given number of parallel slots, each with the tiny model's trained
// context of 2048 tokens.
func Start(t testing.TB, slots int) *Server {
	t.Helper()
	return start(t, slots, 2048)
}

func start(t testing.TB, slots, ctx int) *Server {
	t.Helper()
	bin, model := Binary(), ModelPath()
	for _, f := range []string{bin, model} {
		if _, err := os.Stat(f); err != nil {
			msg := fmt.Sprintf("real engine unavailable: %v (build it with scripts/llama-server.sh; the model comes from ../shared/models)", err)
			if os.Getenv("SYSTEM1_REQUIRE_ENGINE") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	port := freePort(t)
	cmd := exec.Command(bin, "-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"-c", strconv.Itoa(ctx*slots), "-np", strconv.Itoa(slots), "-t", "2", "-a", Model, "--no-webui", "--metrics")
	logf, err := os.Create(filepath.Join(t.TempDir(), "llama-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("llama-server did not become healthy in 60s:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PromptTokens is how many prompt tokens the server has evaluated since it
// started (llama-server's llamacpp:prompt_tokens_total): what a test of
// prompt caching counts.
func (s *Server) PromptTokens(t testing.TB) int {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "llamacpp:prompt_tokens_total "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("llama-server's metrics: %q: %v", line, err)
			}
			return int(n)
		}
	}
	t.Fatalf("llama-server's metrics have no llamacpp:prompt_tokens_total:\n%s", b)
	return 0
}

// Stop kills the server and waits for it; stopping twice is fine.
func (s *Server) Stop() {
	if s.cmd.ProcessState != nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
