//go:build unix

package jobs

import (
	"errors"
	"os"
	"syscall"
)

// lockOutput takes f for this run alone (an advisory lock, released when
// f is closed), or returns errLocked when another run holds it. A file
// system that offers no locks (some network ones) takes none.
func lockOutput(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return nil
}
