package decisionlog

import (
	"database/sql"
	"fmt"
	"slices"
)

// The database/sql drivers the log opens, by name. The package does not
// import them: a main package does (cmd/system1 imports
// modernc.org/sqlite, pure Go, and github.com/jackc/pgx/v5/stdlib), and so
// does each test that opens a log, so that a package that only builds
// records (the answer path, the fleet) does not link two database
// drivers.
const (
	sqliteDriver   = "sqlite"
	postgresDriver = "pgx"
)

// linked reports a driver the program was built without, naming the
// import that registers it.
func linked(driver string) error {
	if slices.Contains(sql.Drivers(), driver) {
		return nil
	}
	imp := map[string]string{sqliteDriver: "modernc.org/sqlite", postgresDriver: "github.com/jackc/pgx/v5/stdlib"}[driver]
	return fmt.Errorf("decision log: this program was built without the %s driver (its main package imports %s)", driver, imp)
}
