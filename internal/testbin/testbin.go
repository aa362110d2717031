// Package testbin builds the system1 binary for tests that drive it as its
// users do, once per test process.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// Path returns the system1 binary, built on the first call into a
// temporary folder that Cleanup removes.
func Path() (string, error) {
	once.Do(func() {
		if dir, err = os.MkdirTemp("", "system1-bin-"); err != nil {
			return
		}
		path = filepath.Join(dir, "system1")
		cmd := exec.Command("go", "build", "-o", path, "system1/cmd/system1")
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("go build system1/cmd/system1: %v\n%s", e, out)
		}
	})
	return path, err
}

// Cleanup removes the built binary; a TestMain calls it after the tests.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// Output collects what a process writes to stderr or stdout, safe for its
// writes and a test's reads at the same time.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
