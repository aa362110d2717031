package pause

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Read accepts only what Write writes (and a missing file); everything
// else is an error naming the file, and Write replaces it.
func TestReadRefusesWhatWriteDidNotWrite(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if _, err := Write(good, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(path string) error
	}{
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
		{"not json", func(p string) error { return os.WriteFile(p, []byte("{not json"), 0o644) }},
		{"nul", func(p string) error { return os.WriteFile(p, []byte("\x00"), 0o644) }},
		{"json null", func(p string) error { return os.WriteFile(p, []byte("null"), 0o644) }},
		{"no key", func(p string) error { return os.WriteFile(p, []byte(`{"changed":"2026-01-01T00:00:00Z"}`), 0o644) }},
		{"null key", func(p string) error { return os.WriteFile(p, []byte(`{"paused":null}`), 0o644) }},
		{"string", func(p string) error { return os.WriteFile(p, []byte(`{"paused":"false"}`), 0o644) }},
		{"number", func(p string) error { return os.WriteFile(p, []byte(`{"paused":0}`), 0o644) }},
		{"array", func(p string) error { return os.WriteFile(p, []byte(`[{"paused":false}]`), 0o644) }},
		{"trailing", func(p string) error { return os.WriteFile(p, []byte(`{"paused":false}x`), 0o644) }},
		{"bad time", func(p string) error { return os.WriteFile(p, []byte(`{"paused":false,"changed":"yesterday"}`), 0o644) }},
		{"huge", func(p string) error {
			return os.WriteFile(p, []byte(`{"paused":false,"x":"`+strings.Repeat("x", 10<<20)+`"}`), 0o644)
		}},
		{"folder", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"dangling link", func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) }},
		{"link to a folder", func(p string) error { return os.Symlink(dir, p) }},
		{"fifo", func(p string) error { return mkfifo(p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := tc.setup(path); err != nil {
				t.Skip(err)
			}
			s, err := Read(path)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("read %+v, error %v; want an error naming the file", s, err)
			}
			if _, err := Write(path, false, time.Now()); err != nil {
				t.Fatalf("write does not repair it: %v", err)
			}
			if s, err := Read(path); err != nil || s.Paused {
				t.Errorf("after the repair: %+v %v", s, err)
			}
		})
	}
	// A link to a good state is read through.
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if s, err := Read(link); err != nil || !s.Paused {
		t.Errorf("a link to a state: %+v %v", s, err)
	}
	// A folder that holds something is not removed.
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(filepath.Join(full, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(full, false, time.Now()); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("write over a folder that holds a file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(full, "keep")); err != nil {
		t.Error("the folder's content is gone")
	}
}

// A state file the user cannot read is an error (the gateway fails
// closed), and Write replaces it. Root reads a file of mode 000, so this
// only runs as another user.
func TestReadUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a file of mode 000: nothing to test as root")
	}
	path := filepath.Join(t.TempDir(), FileName)
	if _, err := Write(path, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Fatal("an unreadable state file read without error")
	}
	if _, err := Write(path, false, time.Now()); err != nil {
		t.Fatalf("write does not repair it: %v", err)
	}
	if s, err := Read(path); err != nil || s.Paused {
		t.Errorf("after the repair: %+v %v", s, err)
	}
}
