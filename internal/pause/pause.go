// Package pause keeps the gateway's on/off switch: a small JSON file that
// `system1 toggle off|on` writes atomically and every face of the gateway
// reads on each call, so a pause takes effect at once without a restart.
package pause

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"system1/internal/atomicfile"
)

// FileName is the state file's name inside the state folder.
const FileName = "state.json"

// State is what the file holds.
type State struct {
	// Paused is true while the gateway is off.
	Paused bool `json:"paused"`
	// Changed is when the state was last written; zero when never.
	Changed time.Time `json:"changed,omitzero"`
}

// Dir picks the state folder: dir when not empty (a --state-dir flag),
// else $CLAUDE_PLUGIN_DATA (Claude Code gives each plugin one), else
// $XDG_STATE_HOME/system1, else ~/.local/state/system1.
func Dir(dir string, getenv func(string) string) string {
	if d := cmp.Or(dir, getenv("CLAUDE_PLUGIN_DATA")); d != "" {
		return d
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "system1")
	}
	home := getenv("HOME")
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	return filepath.Join(home, ".local", "state", "system1")
}

// Path is the state file in Dir(dir, getenv).
func Path(dir string, getenv func(string) string) string {
	return filepath.Join(Dir(dir, getenv), FileName)
}

// maxFileBytes bounds what Read reads: a state is a few dozen bytes.
const maxFileBytes = 4 << 10

// Read reads the state at path. A missing file is the default state: on.
// Anything else that is not a state Write wrote (empty, not JSON, no
// "paused" true or false, too large, a folder, a link to nothing) is an
// error: the caller decides what a broken switch means, and `system1
// toggle on|off` rewrites the file.
func Read(path string) (State, error) {
	// Stat before opening: opening a named pipe would wait for a writer.
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(path); lerr == nil {
			return State{}, fmt.Errorf("%s is a symbolic link to a file that does not exist", path)
		}
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	if !fi.Mode().IsRegular() {
		return State{}, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return State{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return State{}, fmt.Errorf("%s is over %d bytes: not a state file", path, maxFileBytes)
	}
	var s struct {
		Paused  *bool     `json:"paused"`
		Changed time.Time `json:"changed"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	if s.Paused == nil {
		return State{}, fmt.Errorf("%s: no \"paused\": true or false", path)
	}
	return State{Paused: *s.Paused, Changed: s.Changed}, nil
}

// Write sets the state at path atomically: it writes a temporary file in
// the same folder and renames it over the old one, so a reader sees the
// old state or the new one, never half of either.
func Write(path string, paused bool, now time.Time) (State, error) {
	s := State{Paused: paused, Changed: now.UTC().Truncate(time.Second)}
	data, err := json.Marshal(s)
	if err != nil {
		return State{}, err
	}
	dir := filepath.Dir(path)
	// An empty folder in the file's place is removed; one that holds
	// anything is the user's to look at.
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		if err := os.Remove(path); err != nil {
			return State{}, fmt.Errorf("%s is a folder, not a state file, and not empty: remove it and run the command again", path)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return State{}, err
	}
	if err := atomicfile.Write(path, ".state-*.json", append(data, '\n'), 0o600); err != nil {
		return State{}, err
	}
	return s, nil
}
