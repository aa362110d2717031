package outcomes

import (
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, as cmd/system1 links it
	_ "modernc.org/sqlite"             // the "sqlite" driver, as cmd/system1 links it
)
