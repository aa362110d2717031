package outcomes

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/atomicfile"
	"system1/internal/calibration"
	"system1/internal/decision"
)

// Write replaces the file with fits, as replace does but whatever the
// file holds, and applies them.
func (f *FitsFile) Write(fits *calibration.Fits) error {
	data, err := fits.Encode()
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := atomicfile.Write(f.path, ".fits-*.json", data, 0o600); err != nil {
		return err
	}
	_, err = f.loadLocked(false)
	return err
}

// A fits file written by another process (a refit of another replica,
// system1 calibrate) is picked up without a restart; one that no longer
// parses keeps the fits in use, and is said once in the log; Write replaces the file atomically with a
// new revision.
func TestFitsFileReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fits.json")
	write := func(temp float64, mod time.Time) {
		f := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: temp}}}
		f.Revise(mod)
		data, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	write(2, t0)
	var warnings bytes.Buffer
	ff, err := OpenFitsFile(path, slog.New(slog.NewTextHandler(&warnings, nil)))
	if err != nil {
		t.Fatal(err)
	}
	first := ff.Current().Revision
	if changed, err := ff.Reload(); changed || err != nil {
		t.Fatalf("an unchanged file reloaded: %v %v", changed, err)
	}
	write(3, t0.Add(time.Minute))
	if changed, err := ff.Reload(); !changed || err != nil || ff.Current().Fits[0].Temperature != 3 || ff.Current().Revision == first {
		t.Fatalf("the new version was not loaded: %v %v %+v", changed, err, ff.Current())
	}
	if err := os.WriteFile(path, []byte(`{"version":1,"fits":[{}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ff.Reload(); err == nil || ff.Current().Fits[0].Temperature != 3 {
			t.Fatalf("a broken file replaced the fits in use: %v %+v", err, ff.Current())
		}
	}
	if n := strings.Count(warnings.String(), "level=WARN"); n != 1 || !strings.Contains(warnings.String(), path) {
		t.Errorf("a broken file, reloaded twice, was said %d times (want once, naming %s): %s", n, path, warnings.String())
	}
	next := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 4}}}
	next.Revise(time.Now())
	if err := ff.Write(next); err != nil {
		t.Fatal(err)
	}
	onDisk, err := LoadFits(path)
	if err != nil || onDisk.Revision != next.Revision || ff.Current().Revision != next.Revision {
		t.Fatalf("after Write: file %+v (%v), in use %+v", onDisk, err, ff.Current())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".fits-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	var none *FitsFile
	if none.Current() != nil {
		t.Error("a nil FitsFile has fits")
	}
}
