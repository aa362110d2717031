// Package atomicfile replaces a file whole: a reader sees the old bytes
// or the new, never a part, and a crash leaves the old file in place.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to a temporary file beside path, named by pattern
// (as os.CreateTemp takes it), with permissions perm, syncs it, and
// renames it over path. The folder must exist. On failure the temporary
// file is removed.
func Write(path, pattern string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up on failure
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
