package testengine

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// PostgresSchema returns a connection URL for a fresh schema, named prefix
// and random hex, in the server at $SYSTEM1_POSTGRES_URL (scripts/postgres.sh
// starts one; scripts/test.sh does), dropped when the test ends. Without
// that server the test skips, unless SYSTEM1_REQUIRE_POSTGRES is set, where
// it fails.
func PostgresSchema(t testing.TB, prefix string) string {
	t.Helper()
	base := os.Getenv("SYSTEM1_POSTGRES_URL")
	if base == "" {
		if os.Getenv("SYSTEM1_REQUIRE_POSTGRES") != "" {
			t.Fatal("SYSTEM1_REQUIRE_POSTGRES is set but SYSTEM1_POSTGRES_URL is empty")
		}
		t.Skip("no PostgreSQL: set SYSTEM1_POSTGRES_URL (scripts/postgres.sh start DIR prints one; scripts/test.sh does)")
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := prefix + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if a, err := sql.Open("pgx", base); err == nil {
			_, _ = a.Exec("DROP SCHEMA " + schema + " CASCADE")
			a.Close()
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
