package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The keys, exactly as documented.
const decisionLogExample = `decision_log:
  path: decisions.db        # SQLite file; default in the state directory
  url: ""                   # postgres://… instead of the file
  keep_states: false
  retention: 30d
  queue: 10000
  max_rows: 1000000
`

func TestDecisionLogParses(t *testing.T) {
	c, err := Parse([]byte(decisionLogExample))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	d := c.DecisionLog
	if d.Path != "decisions.db" || d.URL != "" || d.KeepStates || time.Duration(d.Retention) != 30*24*time.Hour || d.Queue != 10000 || d.MaxRows != 1000000 {
		t.Fatalf("parsed %+v", d)
	}
	if _, err := Parse([]byte("decision_log: {pth: x.db}")); err == nil {
		t.Fatal("an unknown key under decision_log parsed")
	}
}

func TestDecisionLogRetention(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"30d", 30 * 24 * time.Hour, false},
		{"1.5d", 36 * time.Hour, false},
		{"720h", 720 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"0d", 0, false}, // the default, as a marshalled zero reads back
		{"0s", 0, false},
		{"-1d", 0, true},
		{"-5m", 0, true},
		{"d", 0, true},
		{"NaNd", 0, true},
		{"1e9d", 0, true},
		{"thirty days", 0, true},
	} {
		cfg, err := Parse([]byte("decision_log: {retention: " + c.in + "}"))
		if c.bad {
			if err == nil || !strings.Contains(err.Error(), "decision_log.retention") {
				t.Errorf("%q: %v, want an error naming decision_log.retention", c.in, err)
			}
			continue
		}
		if err != nil || time.Duration(cfg.DecisionLog.Retention) != c.want {
			t.Errorf("%q: %v, %v; want %v", c.in, cfg, err, c.want)
		}
	}
	if v, _ := Retention(30 * 24 * time.Hour).MarshalYAML(); v != "30d" {
		t.Errorf("30 days writes as %v", v)
	}
	// A configuration written out reads back: the zero value too.
	c, err := Parse([]byte("decision_log: {queue: 5}"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil || back.DecisionLog != c.DecisionLog {
		t.Fatalf("%s read back as %+v, %v", out, back, err)
	}
}

func TestDecisionLogCheckNamesTheKey(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{`{url: "postgres://u:pw@db/x", path: a.db}`, "decision_log: path and url"},
		{`{url: "http://u:pw@db/x"}`, "decision_log.url: the scheme"},
		{`{url: "postgres:///x"}`, "decision_log.url: names no host"},
		{`{url: "postgres://u:pw@db:99999999/x%zz"}`, "decision_log.url"},
		{`{path: "a?mode=ro"}`, "decision_log.path"},
		{`{queue: -1}`, "decision_log.queue"},
		{`{queue: 100000000}`, "decision_log.queue"},
		{`{max_rows: -5}`, "decision_log.max_rows"},
		{`{url_env: PG_URL, path: a.db}`, "decision_log: path and url_env exclude each other"},
		{`{url_env: PG_URL, off: true}`, "decision_log: off and url_env exclude each other"},
		{`{url_env: PG_URL, url: "postgres://u:pw@db/x"}`, "decision_log: url and url_env exclude each other"},
		{`{url_env: "PG-URL"}`, "decision_log.url_env: \"PG-URL\" is not a variable's name"},
	} {
		cfg, err := Parse([]byte("decision_log: " + c.yaml))
		if err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		errs := cfg.Check()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: %v, want one error with %q", c.yaml, errs, c.want)
			continue
		}
		if strings.Contains(errs[0].Error(), "pw") {
			t.Errorf("%s: the error repeats the password: %v", c.yaml, errs[0])
		}
	}
	for _, ok := range []string{`{url: "postgres://u:pw@db:5432/x"}`, `{url: "postgresql:///x?host=/tmp/pg"}`, `{}`, `{url_env: SYSTEM1_DECISION_LOG_URL}`} {
		cfg, err := Parse([]byte("decision_log: " + ok))
		if err != nil || len(cfg.Check()) != 0 {
			t.Errorf("%s: %v %v", ok, err, cfg.Check())
		}
	}
}

// url_env's URL is read from its variable and checked as url is, each
// error naming the key and the variable, never the URL (it may hold a
// password); a variable named but empty is an error, not the SQLite file.
func TestDecisionLogURLEnv(t *testing.T) {
	for _, c := range []struct {
		value, want string
	}{
		{"postgres://u:pw@db:5432/x", ""},
		{"  postgresql:///x?host=/tmp/pg  ", ""},
		{"", "decision_log.url_env: $PG_URL is not set or empty"},
		{"http://u:pw@db/x", "decision_log.url_env: the URL in $PG_URL the scheme must be postgres:// or postgresql://"},
		{"postgres:///x", "decision_log.url_env: the URL in $PG_URL names no host"},
		{"postgres://u:pw@db:99999999/x%zz", "decision_log.url_env: the URL in $PG_URL does not parse"},
	} {
		d := DecisionLog{URLEnv: "PG_URL"}
		got, err := d.PostgresURL(func(k string) string {
			if k == "PG_URL" {
				return c.value
			}
			return ""
		})
		switch {
		case c.want == "" && (err != nil || got != strings.TrimSpace(c.value)):
			t.Errorf("%q: %q, %v", c.value, got, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error with %q", c.value, err, c.want)
		case err != nil && strings.Contains(err.Error(), "pw"):
			t.Errorf("%q: the error repeats the password: %v", c.value, err)
		}
	}
	if got, err := (DecisionLog{URL: "postgres://h/db"}).PostgresURL(nil); err != nil || got != "postgres://h/db" {
		t.Errorf("url: %q, %v", got, err)
	}
	if got, err := (DecisionLog{}).PostgresURL(nil); err != nil || got != "" {
		t.Errorf("neither: %q, %v", got, err)
	}
}

func TestDecisionLogFileIsInTheStateDirectory(t *testing.T) {
	env := map[string]string{"XDG_STATE_HOME": "/xdg", "HOME": "/home/u"}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		path, stateDir, want string
	}{
		{"", "", "/xdg/system1/decisions.db"},
		{"", "/flag", "/flag/decisions.db"},
		{"log/d.db", "/flag", "/flag/log/d.db"},
		{"/var/lib/s1/d.db", "/flag", "/var/lib/s1/d.db"},
	} {
		if got := (DecisionLog{Path: c.path}).File(c.stateDir, getenv); got != filepath.FromSlash(c.want) {
			t.Errorf("path %q, state dir %q: %s, want %s", c.path, c.stateDir, got, c.want)
		}
	}
}
