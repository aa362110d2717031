// Package scripts tests the set-up scripts' failure modes as a newcomer
// meets them: each fails fast, non-zero, saying what to do.
package scripts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"system1/internal/testbin"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// script runs scripts/NAME from the repository root with extra
// environment, and returns its exit code, stdout and stderr. The two
// minutes are a hang guard, not a timing check.
func script(t *testing.T, env []string, name string, args ...string) (int, string, string) {
	t.Helper()
	return scriptWithin(t, 2*time.Minute, env, name, args...)
}

// scriptWithin is script with another hang guard: a whole run of run.sh
// builds system1 first, which takes minutes on a cold cache.
func scriptWithin(t *testing.T, guard time.Duration, env []string, name string, args ...string) (int, string, string) {
	t.Helper()
	return commandWithin(t, guard, env, filepath.Join(repoRoot(t), "scripts", name), args...)
}

// command runs the program at path from the repository root with extra
// environment, and returns its exit code, stdout and stderr.
func command(t *testing.T, env []string, path string, args ...string) (int, string, string) {
	t.Helper()
	return commandWithin(t, 2*time.Minute, env, path, args...)
}

func commandWithin(t *testing.T, guard time.Duration, env []string, path string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	// A hung run.sh is stopped with everything it started (system1
	// serve, an engine, a build), not just the script.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	code, stdout, stderr, err := testbin.Run(cmd)
	if ctx.Err() != nil {
		t.Fatalf("%s %v hung:\n%s\nstdout:\n%s%s", path, args, stderr, stdout, logTails(stderr))
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return code, stdout, stderr
}

// isolated is the environment of a run.sh that must not see this
// machine's configuration or cache. Its llama-server fails at once: a
// run.sh that went further than a test expects never builds one.
func isolated(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	return []string{
		"SYSTEM1_CACHE=" + filepath.Join(dir, "cache"),
		"SYSTEM1_CONFIG=" + filepath.Join(dir, "no-config.yaml"),
		"SYSTEM1_MODEL=",
		"SYSTEM1_LLAMA_SERVER=/bin/false",
		"SYSTEM1_PORT=" + strconv.Itoa(freePort(t)),
		"SYSTEM1_ENGINE_PORT=" + strconv.Itoa(freePort(t)),
	}
}

// listen holds a port on 127.0.0.1 until the test ends, and returns it.
func listen(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Two llama-server.sh at once (run.sh and test.sh in two terminals) build
// once: the second waits on the lock in the cache and reuses the first
// one's binary, instead of deleting the tree the first one compiles. The
// compile is a stand-in (SYSTEM1_LLAMA_BUILD) that takes a moment and
// counts its runs; the lock and the reuse are the script's own.
func TestTwoLlamaServerBuildsAtOnce(t *testing.T) {
	dir := t.TempDir()
	stub := filepath.Join(dir, "build")
	runs := filepath.Join(dir, "runs")
	os.WriteFile(stub, []byte("#!/bin/sh\n# $1: work folder, $2: the binary to write\necho run >>"+runs+"\nsleep 2\n[ -d \"$1\" ] || exit 1\nprintf '#!/bin/sh\\n' >\"$2\" && chmod +x \"$2\"\n"), 0o755)
	env := []string{"SYSTEM1_CACHE=" + filepath.Join(dir, "cache"), "SYSTEM1_LLAMA_BUILD=" + stub}

	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, errOut := script(t, env, "llama-server.sh")
			results[i] = result{code, out, errOut}
		}()
	}
	wg.Wait()
	want := filepath.Join(dir, "cache", "llama-server-80fb11a", "llama-server") + "\n"
	waited := 0
	for i, r := range results {
		if r.code != 0 || r.stdout != want {
			t.Errorf("build %d: exit %d, printed %q, want %q\n%s", i, r.code, r.stdout, want, r.stderr)
		}
		if strings.Contains(r.stderr, "another build of llama-server 80fb11a is running") && strings.Contains(r.stderr, "reusing the binary") {
			waited++
		}
	}
	if waited != 1 {
		t.Errorf("%d of the two builds said it waited for the other and reused its binary:\n%s\n---\n%s", waited, results[0].stderr, results[1].stderr)
	}
	if b, _ := os.ReadFile(runs); strings.Count(string(b), "run") != 1 {
		t.Errorf("the compile ran %d times, want once", strings.Count(string(b), "run"))
	}
}

// A second run.sh while one serves fails at once, before it builds or
// starts anything, saying the port is taken and how to pick another; it
// never prints a decision from the other instance.
func TestRunWithPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct{ name, env string }{
		{"serve", "SYSTEM1_PORT=" + port},
		{"engine", "SYSTEM1_ENGINE_PORT=" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := script(t, append(isolated(t), tc.env), "run.sh", "--once", "../shared/models/stories260K.gguf")
			if code == 0 || !strings.Contains(errOut, "port "+port+" on 127.0.0.1") || !strings.Contains(errOut, "is taken") || !strings.Contains(errOut, "SYSTEM1_PORT=") {
				t.Errorf("exit %d; stderr does not say the port is taken and what to do:\n%s", code, errOut)
			}
			if strings.Contains(errOut, "building system1") || out != "" {
				t.Errorf("went on past the taken port: stdout %q\n%s", out, errOut)
			}
		})
	}
}

// A file that is not a model fails before anything is built or started,
// saying what to give instead.
func TestRunWithNotAModel(t *testing.T) {
	code, _, errOut := script(t, isolated(t), "run.sh", "--once", "README.md")
	if code == 0 || !strings.Contains(errOut, "README.md is not a GGUF model file") || !strings.Contains(errOut, "stories260K.gguf") {
		t.Errorf("exit %d:\n%s", code, errOut)
	}
	if strings.Contains(errOut, "building system1") {
		t.Errorf("built system1 before checking the model:\n%s", errOut)
	}
}

// When the engine dies while run.sh waits for it to be ready (a file
// that starts like a GGUF but is not one), run.sh fails at once, not
// after its 120 s wait, showing the end of the engine's log and where it
// is. With SYSTEM1_LLAMA_SERVER set (scripts/test.sh sets it) this is the
// real llama-server; else a stand-in that fails as it does.
func TestRunWhenTheEngineDies(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "broken.gguf")
	os.WriteFile(model, append([]byte("GGUF"), bytes.Repeat([]byte{0xff}, 64)...), 0o644)
	server := os.Getenv("SYSTEM1_LLAMA_SERVER")
	if server == "" {
		server = filepath.Join(dir, "llama-server")
		os.WriteFile(server, []byte("#!/bin/sh\necho 'gguf_init_from_file_impl: invalid model file' >&2\nexit 1\n"), 0o755)
	}
	env := append(isolated(t), "SYSTEM1_LLAMA_SERVER="+server)
	start := time.Now()
	code, _, errOut := script(t, env, "run.sh", "--once", model)
	t.Logf("run.sh gave up after %v", time.Since(start).Round(time.Millisecond))
	if code == 0 || !strings.Contains(errOut, "llama-server exited") || !strings.Contains(errOut, "before it answered") {
		t.Fatalf("exit %d; stderr does not say the engine died:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, filepath.Join("cache", "run", "llama-server-")) {
		t.Errorf("stderr does not point at the engine's log:\n%s", errOut)
	}
	if strings.Contains(errOut, "no answer from") {
		t.Errorf("waited out the readiness timeout instead of seeing the engine exit:\n%s", errOut)
	}
}

// A machine that cannot download the default model gets the explanation
// alone (no curl progress meter before it), and no empty models folder is
// left behind.
func TestRunCannotDownloadTheDefaultModel(t *testing.T) {
	env := isolated(t)
	cache := strings.TrimPrefix(env[0], "SYSTEM1_CACHE=")
	env = append(env, "SYSTEM1_MODEL_URL=http://127.0.0.1:"+strconv.Itoa(freePort(t))+"/model.gguf")
	code, _, errOut := script(t, env, "run.sh", "--once")
	i := strings.Index(errOut, "run.sh: this machine cannot download the default model")
	if code == 0 || i < 0 || !strings.Contains(errOut, "scripts/run.sh /path/to/model.gguf") {
		t.Fatalf("exit %d; no explanation:\n%s", code, errOut)
	}
	if before := errOut[:i]; strings.Contains(before, "%") || strings.Contains(before, "curl") || strings.Contains(before, "fetching") {
		t.Errorf("printed before the explanation:\n%s", before)
	}
	if _, err := os.Stat(filepath.Join(cache, "models")); err == nil {
		t.Errorf("left a models folder behind in %s", cache)
	}
}

// A llama-server cached with other compiler flags (before AMX was left
// out, whose kernels crash on Q8_0 models) is built again, once: the
// flags are kept beside the binary, and a binary with the same flags is
// reused. The compile is a stand-in that counts its runs.
func TestLlamaServerBuiltAgainForOtherFlags(t *testing.T) {
	dir := t.TempDir()
	stub, runs := filepath.Join(dir, "build"), filepath.Join(dir, "runs")
	os.WriteFile(stub, []byte("#!/bin/sh\necho run >>"+runs+"\nprintf '#!/bin/sh\\n' >\"$2\" && chmod +x \"$2\"\n"), 0o755)
	cache := filepath.Join(dir, "cache")
	bin := filepath.Join(cache, "llama-server-80fb11a", "llama-server")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	os.WriteFile(bin, []byte("#!/bin/sh\n# built before the flags were kept\n"), 0o755)
	env := []string{"SYSTEM1_CACHE=" + cache, "SYSTEM1_LLAMA_BUILD=" + stub}
	for i, want := range []string{"run\n", "run\n"} {
		code, out, errOut := script(t, env, "llama-server.sh")
		got, _ := os.ReadFile(runs)
		if code != 0 || out != bin+"\n" || string(got) != want {
			t.Fatalf("call %d: exit %d, printed %q, builds %q, want %q\n%s", i, code, out, got, want, errOut)
		}
		if flags, _ := os.ReadFile(filepath.Join(filepath.Dir(bin), "cflags")); !strings.Contains(string(flags), "-mno-amx-int8") {
			t.Fatalf("call %d: the kept flags %q do not leave AMX out", i, flags)
		}
	}
}

// A build waiting on another's lock is not one line and then silence (a
// newcomer's first run.sh waited 16 minutes so): every few seconds it
// says how long it has waited, where the other build logs and that log's
// last line, read afresh each time. The test holds the lock itself and
// lets go once it has seen two such lines; the waiting script then
// reuses the binary "the other build" made.
func TestWaitingOnAnotherBuildSaysHowItGoes(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	os.MkdirAll(filepath.Join(cache, "llama-server-80fb11a"), 0o755)
	lock, err := os.Create(filepath.Join(cache, "llama-server-80fb11a.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	buildLog := filepath.Join(cache, "llama-server-80fb11a.build.log")
	os.WriteFile(buildLog, []byte("-- Configuring done\n[ 42%] Building CXX object ggml.o\n"), 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(t), "scripts", "llama-server.sh"))
	cmd.Env = append(os.Environ(), "SYSTEM1_CACHE="+cache, "SYSTEM1_LOCK_REPORT_EVERY=1", "SYSTEM1_LLAMA_BUILD=/bin/false")
	// The guard stops flock too, which holds stderr open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var said []string
	// next reads stderr up to a line that holds every one of want.
	next := func(want ...string) {
		t.Helper()
		for sc.Scan() {
			said = append(said, sc.Text())
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(sc.Text(), w) }) {
				return
			}
		}
		t.Fatalf("no line with %q; it said:\n%s", want, strings.Join(said, "\n"))
	}
	next("another build of llama-server 80fb11a is running", buildLog)
	next("still waiting", "s so far", buildLog+" ends: [ 42%] Building CXX object ggml.o")
	f, _ := os.OpenFile(buildLog, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("[ 99%] Linking CXX executable llama-server\n")
	f.Close()
	next("still waiting", "ends: [ 99%] Linking CXX executable llama-server")

	bin := filepath.Join(cache, "llama-server-80fb11a", "llama-server")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	next("reusing the binary the other build made")
	io.Copy(io.Discard, stderr)
	if err := cmd.Wait(); err != nil || stdout.String() != bin+"\n" {
		t.Errorf("exit %v, printed %q, want %q", err, stdout.String(), bin+"\n")
	}
}

// logTails is the end of each log a script's stderr names as "(log:
// PATH)": where a hung run stopped, which its own lines do not say.
func logTails(stderr string) string {
	var b strings.Builder
	for _, m := range regexp.MustCompile(`\(log: ([^)]+)\)`).FindAllStringSubmatch(stderr, -1) {
		data, err := os.ReadFile(m[1])
		if err != nil {
			fmt.Fprintf(&b, "\n%s: %v", m[1], err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "\n%s ends:\n%s", m[1], strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
	return b.String()
}
