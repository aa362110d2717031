package decisionlog

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/testengine"
)

// backend opens logs on one kind of store for a test.
type backend struct {
	name string
	// open opens a log on the same store each time it is called within
	// one test: the same file, or the same PostgreSQL schema.
	open func(t *testing.T, opt Options) *Log
}

// backends are SQLite always and PostgreSQL when SYSTEM1_POSTGRES_URL is
// set (scripts/postgres.sh starts one); with SYSTEM1_REQUIRE_POSTGRES=1 a
// missing server fails instead of skipping.
func backends(t *testing.T) []backend {
	return []backend{
		{"sqlite", func(t *testing.T, opt Options) *Log {
			opt.Path = sqlitePath(t)
			return openLog(t, opt)
		}},
		{"postgres", func(t *testing.T, opt Options) *Log {
			opt.URL = postgresURL(t)
			return openLog(t, opt)
		}},
	}
}

var testFiles = map[*testing.T]string{}

// sqlitePath is one file per test.
func sqlitePath(t *testing.T) string {
	if p, ok := testFiles[t]; ok {
		return p
	}
	p := filepath.Join(t.TempDir(), "state", "decisions.db")
	testFiles[t] = p
	t.Cleanup(func() { delete(testFiles, t) })
	return p
}

var testSchemas = map[testing.TB]string{}

// postgresURL is the server's URL with a fresh schema for the test on its
// search_path, dropped when the test ends.
func postgresURL(t testing.TB) string {
	t.Helper()
	if u, ok := testSchemas[t]; ok {
		return u
	}
	u := testengine.PostgresSchema(t, "t_")
	testSchemas[t] = u
	t.Cleanup(func() { delete(testSchemas, t) })
	return u
}

func openLog(t *testing.T, opt Options) *Log {
	t.Helper()
	l, err := Open(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mass(x float64) *float64 { return &x }

// sample is a record of a three-option choice.
func sample(req, q string, at time.Time) Record {
	return Record{
		RequestID: req, QuestionID: q, Time: at, Face: FaceSystemOne,
		Model: "m1", Node: "n1", Kind: decision.Choice,
		Options:    []string{"billing", "technical", "sales"},
		EngineDist: []float64{0.5, 0.3, 0.2},
		Steps: []Step{
			{Name: "contextual", Version: "cf-1", Dist: []float64{0.4, 0.35, 0.25}},
			{Name: decision.StepTemperature, Version: "fits-3", Dist: []float64{0.38, 0.34, 0.28}},
		},
		LabelMass: mass(0.93),
		Latency:   1234 * time.Microsecond,
		State:     json.RawMessage(`{"ticket":"charged twice"}`),
	}
}

// count returns the rows of a table, read with SQL beside the log.
func count(t *testing.T, l *Log, table string) int {
	t.Helper()
	var n int
	if err := l.store.db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s", table)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
