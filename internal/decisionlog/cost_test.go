package decisionlog

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/decision"
)

// A record's cost is stored exactly, in pico-dollars, and an unknown one
// as NULL; a log written before costs gains the column, its rows' cost
// unknown.
func TestCostColumn(t *testing.T) {
	path := oldLog(t, ",\n\t\t\tcost_picousd BIGINT",
		`INSERT INTO decisions (request_id, question_id, at_ns, face, model, node, kind, options, engine_dist, steps, final_dist, latency_us, state_sha256)
		VALUES ('old', 'q', ?, 'systemone', 'm1', 'n1', 'choice', '["a","b"]', '[0.6,0.4]', '[]', '[0.6,0.4]', 1, '')`, time.Now().UnixNano())
	cost, err := decision.ParseUSD("0.000123456789")
	if err != nil {
		t.Fatal(err)
	}
	l := openLog(t, Options{Path: path})
	ctx := ctxT(t)
	priced := sample("priced", "q", time.Now())
	priced.Cost = &cost
	l.Record(priced)
	l.Record(sample("unpriced", "q", time.Now()))
	for _, tc := range []struct{ id, want string }{{"old", "unknown"}, {"priced", "0.000123456789"}, {"unpriced", "unknown"}} {
		es, err := l.Lookup(ctx, tc.id)
		if err != nil || len(es) != 1 {
			t.Fatalf("%s: %+v, %v", tc.id, es, err)
		}
		got := "unknown"
		if es[0].Cost != nil {
			got = es[0].Cost.String()
		}
		if got != tc.want {
			t.Errorf("%s: cost %s, want %s", tc.id, got, tc.want)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// oldLog writes a SQLite log at a new path as an older build made it: the
// table without the columns strip names (as the schema spells them), with
// one row inserted by insert; it returns the path.
func oldLog(t *testing.T, strip, insert string, args ...any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "decisions.db")
	db, err := sql.Open(sqliteDriver, "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := strings.Replace(schema(false)[0], strip, "", 1)
	if old == schema(false)[0] {
		t.Fatal("the old schema still has the columns")
	}
	if _, err := db.Exec(old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(insert, args...); err != nil {
		t.Fatal(err)
	}
	return path
}
