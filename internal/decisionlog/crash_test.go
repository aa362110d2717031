package decisionlog

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv names the file a re-executed test binary writes to, as the
// writer that TestSIGKILLMidWrite kills.
const childEnv = "DECISIONLOG_CRASH_CHILD"

// TestCrashChild is the child side of TestSIGKILLMidWrite: it records
// without pause and, after each flush, prints how many records are
// committed. It does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("the child of TestSIGKILLMidWrite")
	}
	l, err := Open(context.Background(), Options{Path: path, Queue: 100000, Batch: 64})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		l.Record(sample(fmt.Sprintf("req_%d", i), "q", t0))
		if i%500 == 499 {
			if err := l.Flush(context.Background()); err != nil {
				fmt.Println("flush:", err)
				os.Exit(1)
			}
			fmt.Printf("committed %d\n", l.Stats().Written)
		}
	}
}

func TestSIGKILLMidWrite(t *testing.T) {
	path := sqlitePath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() }) }
	t.Cleanup(kill)
	// Wait for a few commits, then kill the writer while it is writing:
	// it never stops recording, so a transaction is in flight or about
	// to be.
	var committed uint64
	lines := bufio.NewScanner(out)
	for commits := 0; commits < 8 && lines.Scan(); {
		if n, ok := strings.CutPrefix(lines.Text(), "committed "); ok {
			committed, _ = strconv.ParseUint(n, 10, 64)
			commits++
		}
	}
	if committed == 0 {
		t.Fatalf("the child committed nothing: %v", lines.Err())
	}
	kill()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not by SIGKILL", cmd.ProcessState)
	}

	// The file opens cleanly, is intact and holds every committed record.
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
	db.Close()
	ctx := ctxT(t)
	l, err := Open(ctx, Options{Path: path, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	n := count(t, l, "decisions")
	if uint64(n) < committed {
		t.Fatalf("%d records after the kill, fewer than the %d committed", n, committed)
	}
	es, err := l.Lookup(ctx, fmt.Sprintf("req_%d", committed-1))
	if err != nil || len(es) != 1 || len(es[0].Steps) != 2 {
		t.Fatalf("the last committed record reads back as %+v, %v", es, err)
	}
	// And the log takes new writes.
	l.Record(sample("after", "q", t0))
	if es, err := l.Lookup(ctx, "after"); err != nil || len(es) != 1 {
		t.Fatalf("write after the crash: %+v, %v", es, err)
	}
	t.Logf("%d committed before SIGKILL, %d in the file", committed, n)
}
