package outcomes

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/atomicfile"
	"system1/internal/calibration"
)

// LoadFits reads the fits file at path: the one way every face loads
// fits. A file that names no revision gets its content's
// (calibration.ContentRevision). An error names the file.
func LoadFits(path string) (*calibration.Fits, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // names the file already
	}
	f, err := calibration.ParseFits(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Revision == "" {
		f.Revision = calibration.ContentRevision(data)
	}
	return f, nil
}

// fitsCheckEvery is how often a FitsFile looks at its file for a new
// version: often enough that a refit written by another process (serve's,
// or system1 calibrate) is applied within a second or two, rarely enough
// that the stat costs nothing.
const fitsCheckEvery = time.Second

// FitsFile is a fits file that is reloaded when it changes on disk, so
// that serve and mcp apply a refit without a restart, and that refits
// write atomically as a new version.
type FitsFile struct {
	path    string
	current atomic.Pointer[calibration.Fits]
	checked atomic.Int64 // unix nanoseconds of the last look at the file

	mu     sync.Mutex // serialises loads and writes
	stat   fileStamp
	log    *slog.Logger
	warned string // the last reload's error, said once until the file reads
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// OpenFitsFile loads the fits file at path. log (nil: none) hears once
// of each way a later version fails to read, since its fits stay in use.
func OpenFitsFile(path string, log *slog.Logger) (*FitsFile, error) {
	f := &FitsFile{path: path, log: log}
	if _, err := f.loadLocked(false); err != nil {
		return nil, err
	}
	f.checked.Store(time.Now().UnixNano())
	return f, nil
}

// Current returns the fits in use, first reloading the file when it has
// changed since it was last looked at (at most once a fitsCheckEvery). A
// file that no longer parses keeps the fits in use. A nil *FitsFile has
// none.
func (f *FitsFile) Current() *calibration.Fits {
	if f == nil {
		return nil
	}
	now := time.Now().UnixNano()
	if last := f.checked.Load(); now-last >= int64(fitsCheckEvery) && f.checked.CompareAndSwap(last, now) {
		_, _ = f.Reload()
	}
	return f.current.Load()
}

// Reload loads the file again when its modification time or size
// changed, reporting whether it did. On error the fits in use stay.
func (f *FitsFile) Reload() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed, err := f.loadLocked(true)
	switch {
	case err == nil:
		f.warned = ""
	case f.log != nil && err.Error() != f.warned:
		f.warned = err.Error()
		f.log.Warn("the fits file does not read; the fits loaded before stay in use until it does", "err", err)
	}
	return changed, err
}

// loadLocked reads the file, unless ifChanged is set and its
// modification time and size are those last read, reporting whether it
// did; f.mu is held, or f is not shared yet.
func (f *FitsFile) loadLocked(ifChanged bool) (bool, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return false, err
	}
	stamp := fileStamp{st.ModTime(), st.Size()}
	if ifChanged && stamp == f.stat {
		return false, nil
	}
	fits, err := LoadFits(f.path)
	if err != nil {
		return false, err
	}
	f.stat = stamp
	f.current.Store(fits)
	return true, nil
}

// replace writes fits made from base over the file, atomically (a
// temporary file in the same folder, synced, then renamed over it), and
// applies them. It writes nothing, and loads the file, when the file is
// no longer base (written by another process, such as system1
// calibrate, since base was loaded), so that what was written there is
// not lost under fits made without it.
func (f *FitsFile) replace(base, fits *calibration.Fits) error {
	data, err := fits.Encode()
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// A file changed but unreadable is not written over either: it
	// says why, as LoadFits does (naming the file), until it is mended.
	changed, err := f.loadLocked(true)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("writing fits: the file in place does not read, so it is not written over: %w", err)
	case changed || f.current.Load() != base:
		return fmt.Errorf("writing fits: %s changed while the refit ran; the next refit starts from it", f.path)
	}
	if err := atomicfile.Write(f.path, ".fits-*.json", data, 0o600); err != nil {
		return fmt.Errorf("writing fits: %w", err)
	}
	_, err = f.loadLocked(false)
	return err
}
