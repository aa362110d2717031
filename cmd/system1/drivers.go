package main

// The decision log's database drivers are linked here, in main, and
// nowhere else: internal/decisionlog opens them by name through
// database/sql, so the packages that build its records do not link them.
import (
	_ "github.com/jackc/pgx/v5/stdlib" // PostgreSQL, for decision_log.url
	_ "modernc.org/sqlite"             // SQLite in pure Go, the default decision log
)
