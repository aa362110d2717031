package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"system1/internal/pause"
)

// DecisionLog configures the decision log: an SQLite file in the state
// directory by default, or PostgreSQL when URL or URLEnv is set.
type DecisionLog struct {
	// Off turns the log off: nothing is recorded and feedback is refused.
	Off bool `yaml:"off"`
	// Path is the SQLite file (default decisions.db); a relative path is
	// in the state directory, which may be the only writable place.
	Path string `yaml:"path"`
	// URL is a postgres:// URL used instead of the file, so that several
	// replicas share one log. It may hold a password: it is never logged
	// or repeated in an error.
	URL string `yaml:"url"`
	// URLEnv names a variable holding the postgres:// URL instead, so
	// that the URL (and its password) can come from a secret rather than
	// the file: a Kubernetes Secret, say. The variable is read when a
	// face opens the log (PostgresURL), and checked as URL is.
	URLEnv string `yaml:"url_env"`
	// KeepStates stores each state beside its SHA-256.
	KeepStates bool `yaml:"keep_states"`
	// Retention is how long records are kept (0: the default, 30d).
	Retention Retention `yaml:"retention"`
	// Queue bounds the records waiting to be written (default 10000);
	// past it records are dropped and counted.
	Queue int `yaml:"queue"`
	// MaxRows bounds the records kept (default 1000000, about 0.5 GiB
	// without states); past it the oldest go.
	MaxRows int64 `yaml:"max_rows"`
}

// DefaultDecisionLogFile is the SQLite file's name in the state directory.
const DefaultDecisionLogFile = "decisions.db"

// MaxDecisionLogQueue bounds queue, so a typo cannot reserve gigabytes.
const MaxDecisionLogQueue = 10_000_000

// File is the SQLite file the log uses: Path, or DefaultDecisionLogFile,
// in the state directory (pause.Dir) unless Path is absolute.
func (d DecisionLog) File(stateDir string, getenv func(string) string) string {
	p := cmp.Or(d.Path, DefaultDecisionLogFile)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(pause.Dir(stateDir, getenv), p)
}

// Check lists what is wrong with the section alone, as Config.Check does.
func (d DecisionLog) Check() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, k := range []struct {
		name, value string
	}{{"url", d.URL}, {"url_env", d.URLEnv}} {
		if k.value == "" {
			continue
		}
		if d.Off {
			bad("decision_log: off and %s exclude each other", k.name)
		}
		if d.Path != "" {
			bad("decision_log: path and %s exclude each other: %s is PostgreSQL instead of the file", k.name, k.name)
		}
	}
	if d.URL != "" && d.URLEnv != "" {
		bad("decision_log: url and url_env exclude each other: give the URL in the file or in the variable")
	}
	if d.URL != "" {
		if err := checkPostgresURL(d.URL); err != nil {
			bad("decision_log.url: %v", err)
		}
	}
	if d.URLEnv != "" && !envName(d.URLEnv) {
		bad("decision_log.url_env: %q is not a variable's name (letters, digits and _, not starting with a digit)", d.URLEnv)
	}
	if strings.ContainsAny(d.Path, "?#") || strings.ContainsRune(d.Path, 0) {
		bad("decision_log.path: %q has a ?, # or NUL, which SQLite's file names cannot carry", d.Path)
	}
	if d.Queue < 0 || d.Queue > MaxDecisionLogQueue {
		bad("decision_log.queue: %d is not in 0..%d (0 is the default, 10000)", d.Queue, MaxDecisionLogQueue)
	}
	if d.MaxRows < 0 {
		bad("decision_log.max_rows: %d is negative", d.MaxRows)
	}
	return errs
}

// checkPostgresURL says what is wrong with a decision log URL, never
// quoting it: it may hold a password.
func checkPostgresURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("does not parse as a URL")
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		return errors.New("the scheme must be postgres:// or postgresql://")
	case u.Host == "" && u.Query().Get("host") == "":
		return errors.New("names no host (give one, or a socket folder as ?host=)")
	}
	return nil
}

// PostgresURL is the PostgreSQL URL the log uses: url, or the value of
// the variable url_env names, checked as url is when the file is read;
// "" for the SQLite file. A variable named but empty is an error, never
// a quiet fall back to a file of this replica's own. getenv reads the
// variable. The error names the key and the variable, never the URL.
func (d DecisionLog) PostgresURL(getenv func(string) string) (string, error) {
	if d.URLEnv == "" {
		return d.URL, nil
	}
	v := strings.TrimSpace(getenv(d.URLEnv))
	if v == "" {
		return "", fmt.Errorf("decision_log.url_env: $%s is not set or empty; it should hold the postgres:// URL", d.URLEnv)
	}
	if err := checkPostgresURL(v); err != nil {
		return "", fmt.Errorf("decision_log.url_env: the URL in $%s %v", d.URLEnv, err)
	}
	return v, nil
}

// Retention is a duration written as days ("30d") or as a Go duration
// ("720h", "90m"); 0 is the default.
type Retention time.Duration

// maxRetentionDays keeps days*24h within a time.Duration.
const maxRetentionDays = 100_000

// UnmarshalYAML parses "Nd" or a Go duration; it must not be negative.
func (r *Retention) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSpace(n.Value)
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		x, err := strconv.ParseFloat(days, 64)
		if err != nil || !(x >= 0) || x > maxRetentionDays || math.IsInf(x, 0) {
			return fmt.Errorf("line %d: decision_log.retention %q is not a number of days such as 30d", n.Line, n.Value)
		}
		d = time.Duration(x * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 0 {
			return fmt.Errorf("line %d: decision_log.retention %q is not a duration such as 30d or 720h", n.Line, n.Value)
		}
	}
	*r = Retention(d)
	return nil
}

// MarshalYAML writes whole days as "Nd", else a Go duration.
func (r Retention) MarshalYAML() (any, error) {
	d := time.Duration(r)
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour)), nil
	}
	return d.String(), nil
}
