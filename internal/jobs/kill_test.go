package jobs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/testbin"
)

// childEnv names, in the environment of this test binary run again as a
// child, the job it is to run: the input, the output and the endpoint.
const childEnv = "JOBS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(child())
	}
	testbin.Main(m)
}

// child runs the job its environment names, as `system1 run` would: a
// process of its own that the test can kill.
func child() int {
	job, err := ParseQuestions([]byte(testQuestions), "m1", decision.DefaultLimits())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := Run(context.Background(), Options{
		In: os.Getenv("JOBS_IN"), Out: os.Getenv("JOBS_OUT"), Job: job,
		Decider: &RemoteDecider{URL: os.Getenv("JOBS_URL")}, Concurrency: 4,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = s.WriteText(os.Stderr)
	return 0
}

// startChild starts this test binary as a runner over the job.
func startChild(t *testing.T, in, out, url string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", "JOBS_IN="+in, "JOBS_OUT="+out, "JOBS_URL="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr
}

// lines counts the whole lines of path.
func lines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// A runner killed with SIGKILL, twice, mid-run, leaves answers that the
// next run completes: every row exactly once, in input order, with its
// answers. The server holds the rows past each kill point, so the kill
// lands mid-run however fast the machine.
func TestKillResume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch bool
	}{{"row by row", false}, {"in batches", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 1000
			js := &jevServer{delay: 4 * time.Millisecond, batch: tc.batch}
			srv := newJevServer(t, js)
			dir := t.TempDir()
			in, out := writeRows(t, dir, n), filepath.Join(dir, "out.jsonl")
			for _, killAt := range []int{n / 4, n / 2} {
				js.holdFrom.Store(int64(killAt))
				cmd, stderr := startChild(t, in, out, srv.URL)
				deadline := time.Now().Add(30 * time.Second)
				for lines(out) < killAt {
					if time.Now().After(deadline) {
						_ = cmd.Process.Kill()
						t.Fatalf("%d lines after 30s\n%s", lines(out), stderr)
					}
					time.Sleep(time.Millisecond)
				}
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				err := cmd.Wait()
				got := lines(out)
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("the runner was not killed (%v): it had finished, %d lines\n%s", err, got, stderr)
				}
				if got >= n {
					t.Fatalf("the kill landed after the last row (%d lines)", got)
				}
				t.Logf("killed at %d lines", got)
			}
			js.holdFrom.Store(0)
			cmd, stderr := startChild(t, in, out, srv.URL)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the resumed run: %v\n%s", err, stderr)
			}
			checkAnswers(t, readOut(t, out), n)
		})
	}
}
