package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, tc := range []struct {
		data string
		perm os.FileMode
	}{{"first\n", 0o600}, {"second, longer\n", 0o644}, {"", 0o600}} {
		if err := Write(path, ".state-*.json", []byte(tc.data), tc.perm); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tc.data {
			t.Fatalf("after writing %q the file holds %q, %v", tc.data, got, err)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != tc.perm {
			t.Errorf("after writing %q with %v the file's mode is %v, %v", tc.data, tc.perm, st.Mode().Perm(), err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want the file alone: %v", len(entries), entries)
	}
}

func TestWriteFailsWithoutTheFolderAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "missing", "state.json"), ".state-*", []byte("x"), 0o600); err == nil {
		t.Fatal("Write into a missing folder succeeded")
	}
	// A folder in the file's place: the rename fails, and the temporary
	// file is removed.
	path := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, ".taken-*", []byte("x"), 0o600); err == nil {
		t.Fatal("Write over a non-empty folder succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want the folder alone: %v", len(entries), entries)
	}
}
