// Package pause keeps the gateway's on/off switch: a small JSON file that
// `system1 toggle off|on` writes atomically and every face of the gateway
// reads on each call, so a pause takes effect at once without a restart.
package pause

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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
	if dir != "" {
		return dir
	}
	if d := getenv("CLAUDE_PLUGIN_DATA"); d != "" {
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

// Read reads the state at path. A missing file is the default state: on.
func Read(path string) (State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return State{}, err
	}
	tmp, err := os.CreateTemp(dir, ".state-*.json")
	if err != nil {
		return State{}, err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up on failure
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return State{}, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return State{}, err
	}
	if err := tmp.Close(); err != nil {
		return State{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return State{}, err
	}
	return s, nil
}
