//go:build !unix

package jobs

import "os"

// lockOutput takes no lock where the system offers no flock.
func lockOutput(*os.File) error { return nil }
