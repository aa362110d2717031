package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"system1/internal/calibration"
	"system1/internal/decisionlog"
)

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

	mu   sync.Mutex // serialises loads and writes
	stat fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// OpenFitsFile loads the fits file at path.
func OpenFitsFile(path string) (*FitsFile, error) {
	f := &FitsFile{path: path}
	if err := f.load(); err != nil {
		return nil, err
	}
	f.checked.Store(time.Now().UnixNano())
	return f, nil
}

// Path is the file's path.
func (f *FitsFile) Path() string { return f.path }

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
	st, err := os.Stat(f.path)
	if err != nil {
		return false, err
	}
	if (fileStamp{st.ModTime(), st.Size()}) == f.stat {
		return false, nil
	}
	if err := f.loadLocked(); err != nil {
		return false, err
	}
	return true, nil
}

func (f *FitsFile) load() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadLocked()
}

func (f *FitsFile) loadLocked() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	fits, err := calibration.LoadFits(f.path)
	if err != nil {
		return err
	}
	f.stat = fileStamp{st.ModTime(), st.Size()}
	f.current.Store(fits)
	return nil
}

// Write replaces the file with fits, atomically (a temporary file in the
// same folder, synced, then renamed over it), and applies them.
func (f *FitsFile) Write(fits *calibration.Fits) error {
	data, err := fits.Encode()
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".fits-*.json")
	if err != nil {
		return fmt.Errorf("writing fits: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left only on failure
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing fits: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing fits: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing fits: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("writing fits: %w", err)
	}
	return f.loadLocked()
}

// RefitOptions configure RefitFromLog.
type RefitOptions struct {
	// Window is how far back the log is read (0: DefaultReportWindow).
	Window time.Duration
	// MinOutcomes a bucket needs (0: 30); Holdout the share held out to
	// score the refit (0: 0.2); Seed the split's seed.
	MinOutcomes int
	Holdout     float64
	Seed        uint64
	// TargetError is the error rate each adopted fit's gate keeps under
	// (0: DefaultTargetError).
	TargetError float64
}

// RefitFromLog refits every bucket of the log's labelled answers against
// the fits in use, and writes a new version of the file when a refit
// lowered held-out NLL. It returns each bucket's decision, and the new
// revision ("" when nothing was adopted).
func (f *FitsFile) RefitFromLog(ctx context.Context, log *decisionlog.Log, o RefitOptions) ([]RefitDecision, string, error) {
	if o.Window <= 0 {
		o.Window = DefaultReportWindow
	}
	if o.MinOutcomes <= 0 {
		o.MinOutcomes = 30
	}
	if o.Holdout <= 0 {
		o.Holdout = 0.2
	}
	if log == nil {
		return nil, "", fmt.Errorf("the decision log is off")
	}
	now := time.Now()
	groups, err := log.Labelled(ctx, now.Add(-o.Window), now.Add(time.Second), "")
	if err != nil {
		return nil, "", err
	}
	next, ds := Refit(groups, f.Current(), o.Holdout, o.Seed, o.MinOutcomes, o.TargetError, now)
	if next == nil {
		return ds, "", nil
	}
	if err := f.Write(next); err != nil {
		return ds, "", err
	}
	return ds, next.Revision, nil
}
