package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, data := range []string{"first\n", "second, longer\n", ""} {
		if err := Write(path, ".state-*.json", []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("after writing %q the file holds %q, %v", data, got, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want the file alone: %v", len(entries), entries)
	}
}

func TestWriteFailsWithoutTheFolderAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "missing", "state.json"), ".state-*", []byte("x")); err == nil {
		t.Fatal("Write into a missing folder succeeded")
	}
	// A folder in the file's place: the rename fails, and the temporary
	// file is removed.
	path := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, ".taken-*", []byte("x")); err == nil {
		t.Fatal("Write over a non-empty folder succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want the folder alone: %v", len(entries), entries)
	}
}
