package httpapi_test

// The decision log's SQLite driver, which main links in system1.
import _ "modernc.org/sqlite"
