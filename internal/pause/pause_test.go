package pause

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// The state folder follows the documented order: the flag, then
// $CLAUDE_PLUGIN_DATA, then $XDG_STATE_HOME/system1, then
// ~/.local/state/system1.
func TestDirOrder(t *testing.T) {
	all := map[string]string{"CLAUDE_PLUGIN_DATA": "/p", "XDG_STATE_HOME": "/x", "HOME": "/h"}
	cases := []struct {
		flag string
		env  map[string]string
		want string
	}{
		{"/flag", all, "/flag"},
		{"", all, "/p"},
		{"", map[string]string{"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/system1"},
		{"", map[string]string{"HOME": "/h"}, "/h/.local/state/system1"},
	}
	for _, c := range cases {
		if got := Dir(c.flag, env(c.env)); got != c.want {
			t.Errorf("Dir(%q, %v) = %q; want %q", c.flag, c.env, got, c.want)
		}
	}
	if got := Path("/d", env(nil)); got != "/d/state.json" {
		t.Errorf("Path = %q", got)
	}
}

// A missing file means on; Write then Read round-trips; a corrupt file is
// an error, not a guess.
func TestReadWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", FileName)
	s, err := Read(path)
	if err != nil || s.Paused {
		t.Fatalf("missing file: %+v, %v; want on", s, err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if _, err := Write(path, true, now); err != nil {
		t.Fatal(err)
	}
	s, err = Read(path)
	if err != nil || !s.Paused || !s.Changed.Equal(now) {
		t.Fatalf("after off: %+v, %v", s, err)
	}
	if _, err := Write(path, false, now); err != nil {
		t.Fatal(err)
	}
	if s, _ = Read(path); s.Paused {
		t.Fatal("after on: still paused")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Error("a corrupt state file read without error")
	}
}

// Readers racing a writer always see a whole state, never a torn file.
func TestWriteIsAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if _, err := Write(path, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			if _, err := Write(path, i%2 == 0, time.Now()); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if _, err := Read(path); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
