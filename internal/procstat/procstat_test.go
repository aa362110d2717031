package procstat

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestCPUCountsWorkDone(t *testing.T) {
	before, err := CPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	// Spin until the process's CPU time moves past a few of /proc's
	// 10 ms ticks, however fast the machine: the figure must follow work.
	n := 0
	for {
		now, err := CPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 30*time.Millisecond {
			break
		}
		for i := range 1_000_000 {
			n += i & 1
		}
	}
	if n == 0 {
		t.Fatal("the loop did no work")
	}
}

func TestMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, tc := range []struct {
		field string
		ok    bool
	}{
		{"VmRSS", true},
		{"VmHWM", true},
		{"VmNothing", false},
	} {
		t.Run(tc.field, func(t *testing.T) {
			n, err := Memory(os.Getpid(), tc.field)
			if (err == nil) != tc.ok {
				t.Fatalf("Memory(%q) = %d, %v", tc.field, n, err)
			}
			if tc.ok && n < 1<<20 { // a Go test binary holds more than a MiB
				t.Fatalf("Memory(%q) = %d bytes, want at least a MiB", tc.field, n)
			}
			if !tc.ok && !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("the error %q does not name the field", err)
			}
		})
	}
	if _, err := Memory(-1, "VmRSS"); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

func TestLoadAverage(t *testing.T) {
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if f := strings.Fields(LoadAverage()); len(f) != 3 {
		t.Fatalf("LoadAverage() = %q, want three numbers", LoadAverage())
	}
}
