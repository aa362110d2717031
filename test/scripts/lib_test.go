package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A build's own output (thousands of lines of compiler progress and
// upstream warnings) goes to a log file in the cache, not into the test
// suite's log: a good build prints a few lines of progress naming the
// file; a failed one prints the end of that file, where the error is, and
// where the whole is. The compile is a stand-in (SYSTEM1_LLAMA_BUILD)
// that prints as much as a real one.
func TestBuildOutputGoesToALog(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			dir := t.TempDir()
			stub := filepath.Join(dir, "build")
			end := "printf '#!/bin/sh\\n' >\"$2\" && chmod +x \"$2\"\n"
			if fail {
				end = "echo 'error: the last words' >&2\nexit 3\n"
			}
			os.WriteFile(stub, []byte("#!/bin/sh\nfor i in $(seq 2000); do echo \"noise line $i\"; echo \"warning: upstream $i\" >&2; done\n"+end), 0o755)
			cache := filepath.Join(dir, "cache")
			code, out, errOut := script(t, []string{"SYSTEM1_CACHE=" + cache, "SYSTEM1_LLAMA_BUILD=" + stub}, "llama-server.sh")
			log := filepath.Join(cache, "llama-server-80fb11a.build.log")
			if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "noise line 2000") || !strings.Contains(string(b), "warning: upstream 1\n") {
				t.Errorf("the build log %s does not hold the build's output: %v", log, err)
			}
			if !strings.Contains(errOut, log) {
				t.Errorf("stderr does not name the build log %s:\n%s", log, errOut)
			}
			if lines := strings.Count(errOut, "\n"); lines > 60 {
				t.Errorf("stderr has %d lines, the build's output with them:\n%.2000s", lines, errOut)
			}
			if strings.Contains(errOut, "noise line 1\n") || strings.Contains(out, "noise") {
				t.Errorf("the start of the build's output reached the terminal:\nstdout: %.500s\nstderr: %.2000s", out, errOut)
			}
			if !fail {
				if code != 0 || out != filepath.Join(cache, "llama-server-80fb11a", "llama-server")+"\n" {
					t.Errorf("exit %d, printed %q\n%s", code, out, errOut)
				}
				return
			}
			if code == 0 || out != "" || !strings.Contains(errOut, "error: the last words") {
				t.Errorf("a failed build: exit %d, printed %q; stderr does not end with the build's last words:\n%s", code, out, errOut)
			}
		})
	}
}

// Every Debian install goes through lib.sh's apt_install, which runs
// apt-get through sudo unless this is root, as a newcomer's machine
// needs; no set-up or benchmark script calls apt-get on its own.
func TestAptThroughSudo(t *testing.T) {
	scripts, err := filepath.Glob(filepath.Join(repoRoot(t), "scripts", "*"))
	if err != nil {
		t.Fatal(err)
	}
	benches, err := filepath.Glob(filepath.Join(repoRoot(t), "bench", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	scripts = append(scripts, benches...)
	call := regexp.MustCompile(`(^|[\s;&|(])apt-get\s+(update|install)`)
	for _, s := range scripts {
		if s == filepath.Join(repoRoot(t), "scripts", "lib.sh") {
			continue
		}
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(line, "#"); call.MatchString(code) {
				t.Errorf("%s:%d calls apt-get itself, not through lib.sh's apt_install: %s", filepath.Base(s), i+1, strings.TrimSpace(line))
			}
		}
	}

	for _, tc := range []struct {
		uid  string
		want string
	}{
		{"1000", "sudo apt-get update -q\napt-get update -q\nsudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake\napt-get install -y -q cmake\n"},
		{"0", "apt-get update -q\napt-get install -y -q cmake\n"},
	} {
		t.Run("uid "+tc.uid, func(t *testing.T) {
			bin := t.TempDir()
			calls := filepath.Join(bin, "calls")
			stubs := map[string]string{
				"id":      "#!/bin/sh\necho " + tc.uid + "\n",
				"sudo":    "#!/bin/sh\necho \"sudo $*\" >>" + calls + "\nexec \"$@\"\n",
				"apt-get": "#!/bin/sh\necho \"apt-get $*\" >>" + calls + "\n",
			}
			for name, body := range stubs {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "-c", `set -euo pipefail; . scripts/lib.sh; apt_install cmake`)
			cmd.Dir = repoRoot(t)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("apt_install: %v\n%s", err, out)
			}
			if got := readFile(t, calls); got != tc.want {
				t.Errorf("as uid %s apt_install ran:\n%s\nwant:\n%s", tc.uid, got, tc.want)
			}
		})
	}
}

// scripts/gotest.sh, the suite's Go test step, shows what matters: a
// failed test's output in full, none of a passing one's, and last the
// counts of tests passed, failed and skipped (or, for scripts/test.sh, in
// $SYSTEM1_TEST_COUNTS); it exits with go test's status. It runs here
// over a module of four tests made for it.
func TestGoTestCounts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module counted\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(`package counted

import "testing"

func TestPasses(t *testing.T) { t.Log("a passing test's chatter") }
func TestFails(t *testing.T)  { t.Log("the whole story"); t.Error("boom") }
func TestSkips(t *testing.T)  { t.Skip("no engine here") }
func TestSub(t *testing.T)    { t.Run("one", func(t *testing.T) {}) }
`), 0o644)
	const want = "go test: 3 passed, 1 failed, 1 skipped"
	counts := filepath.Join(dir, "counts")
	for _, env := range []string{"SYSTEM1_TEST_COUNTS=", "SYSTEM1_TEST_COUNTS=" + counts} {
		cmd := exec.Command(filepath.Join(repoRoot(t), "scripts", "gotest.sh"), "./...")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=", env)
		b, err := cmd.CombinedOutput()
		out := string(b)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("%s: exit: %v, want status 1\n%s", env, err, out)
		}
		if !strings.Contains(out, "the whole story") || !strings.Contains(out, "boom") || strings.Contains(out, "chatter") {
			t.Errorf("%s: not the failed test's output in full and nothing of the passing one's:\n%s", env, out)
		}
		if env == "SYSTEM1_TEST_COUNTS=" && !strings.HasSuffix(out, "\n"+want+"\n") {
			t.Errorf("the output does not end with %q:\n%s", want, out)
		}
	}
	if got, _ := os.ReadFile(counts); string(got) != want+"\n" {
		t.Errorf("$SYSTEM1_TEST_COUNTS holds %q, want %q", got, want)
	}
}
