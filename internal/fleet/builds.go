package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"system1/internal/atomicfile"
	"system1/internal/fingerprint"
)

// BuildsFile keeps the builds a process named in a JSON file that every
// process of one configuration reads (config's fingerprint.builds), so
// that serve, decide and mcp name one build alike (docs/fingerprints.md).
type BuildsFile struct{ Path string }

var _ BuildStore = BuildsFile{}

// buildsDoc is the file's JSON.
type buildsDoc struct {
	Builds []fingerprint.Build `json:"builds"`
}

// maxBuildsBytes bounds the file read: a build is a few kilobytes.
const maxBuildsBytes = 16 << 20

// Load reads the file; a missing file is no builds.
func (f BuildsFile) Load() ([]fingerprint.Build, error) {
	file, err := os.Open(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxBuildsBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBuildsBytes {
		return nil, fmt.Errorf("%s: over %d bytes", f.Path, maxBuildsBytes)
	}
	var doc buildsDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return doc.Builds, nil
}

// Save writes bs, after the builds another process saved meanwhile that
// bs lacks, through a temporary file renamed over the old one, so that a
// reader never sees half a file. Two processes saving at once may lose
// one's new build until it saves again; neither corrupts the file.
func (f BuildsFile) Save(bs []fingerprint.Build) error {
	on, _ := f.Load() // an unreadable file is replaced
	known := map[string]bool{}
	for _, b := range bs {
		known[b.ID] = true
	}
	for _, b := range on {
		if !known[b.ID] {
			bs = append(bs, b)
		}
	}
	data, err := json.MarshalIndent(buildsDoc{bs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(f.Path, ".builds-*.json", append(data, '\n'), 0o600)
}
