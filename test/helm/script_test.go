package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"system1/internal/testbin"
)

// helmScript runs scripts/helm.sh with a stand-in for go first on the
// PATH (the compile is the stand-in's; the cache, the lock, the log and
// the reuse are the script's own), and returns its exit code, stdout and
// stderr.
func helmScript(t *testing.T, cache, fakeGo string) (int, string, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "helm.sh"))
	cmd.Env = append(os.Environ(), "SYSTEM1_CACHE="+cache, "PATH="+bin+":"+os.Getenv("PATH"))
	code, stdout, stderr, err := testbin.Run(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return code, stdout, stderr
}

// Two helm.sh at once (two worktrees, CI and a developer) compile once:
// the second waits on the lock and finds the first one's binary. The
// compile is Helm's cmd/helm alone, with -trimpath, its output in the
// log file, not on the terminal.
func TestHelmScriptBuildsOnce(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	fakeGo := "#!/bin/sh\necho \"$@\" >>" + runs + "\necho compiling lots\nsleep 2\nmkdir -p \"$GOBIN\"\nprintf '#!/bin/sh\\n' >\"$GOBIN/helm\"\nchmod +x \"$GOBIN/helm\"\n"
	cache := filepath.Join(dir, "cache")
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			code, out, errOut := helmScript(t, cache, fakeGo)
			results[i] = result{code, out, errOut}
		})
	}
	wg.Wait()
	want := filepath.Join(cache, "helm-4.3.1", "helm") + "\n"
	waited := 0
	for i, r := range results {
		if r.code != 0 || r.stdout != want {
			t.Errorf("run %d: exit %d, printed %q, want %q\n%s", i, r.code, r.stdout, want, r.stderr)
		}
		if strings.Contains(r.stderr, "another build of helm 4.3.1 is running") {
			waited++
		}
		if strings.Contains(r.stdout+r.stderr, "compiling lots") {
			t.Errorf("run %d let the compile's output through:\n%s", i, r.stderr)
		}
	}
	if waited != 1 {
		t.Errorf("%d of the two runs waited for the other:\n%s\n---\n%s", waited, results[0].stderr, results[1].stderr)
	}
	b, _ := os.ReadFile(runs)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("the compile ran %d times, want once:\n%s", n, b)
	}
	for _, arg := range []string{"install", "-trimpath", "helm.sh/helm/v4/cmd/helm@v4.3.1"} {
		if !strings.Contains(string(b), arg) {
			t.Errorf("the compile was not given %s: go %s", arg, b)
		}
	}
	if log, err := os.ReadFile(filepath.Join(cache, "helm-4.3.1", "build.log")); err != nil || !strings.Contains(string(log), "compiling lots") {
		t.Errorf("the build log: %q, %v", log, err)
	}
	// A third run finds the binary without compiling.
	if code, out, _ := helmScript(t, cache, "#!/bin/sh\nexit 1\n"); code != 0 || out != want {
		t.Errorf("a run over the cache: exit %d, printed %q", code, out)
	}
}

// A failed build fails the script, shows the end of the log, and caches
// nothing, so the next run builds again.
func TestHelmScriptBuildFails(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "cache")
	code, out, stderr := helmScript(t, cache, "#!/bin/sh\necho 'go: module lookup disabled' >&2\nexit 1\n")
	if code == 0 || out != "" {
		t.Errorf("exit %d, printed %q: want a failure and no path", code, out)
	}
	if !strings.Contains(stderr, "the build failed") || !strings.Contains(stderr, "module lookup disabled") {
		t.Errorf("stderr does not say the build failed and why:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(cache, "helm-4.3.1", "helm")); err == nil {
		t.Error("a failed build left a binary in the cache")
	}
}
