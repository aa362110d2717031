package decisionlog

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"system1/internal/decision"
)

// UsageGroups are what usage may be grouped by: the key's name, the
// model that answered and the UTC day.
var UsageGroups = []string{"key", "model", "day"}

// Usage is one group's use of the log's window: what its answers cost,
// how many questions were answered and the tokens they used.
type Usage struct {
	// Key, Model and Day (YYYY-MM-DD, UTC) name the group, each "" when
	// not grouped by it (Key is "" too for answers no key asked).
	Key, Model, Day string
	// Cost is the sum of the priced answers' cost; Unpriced counts the
	// answers of nodes without a price, whose cost is not known.
	Cost      decision.USD
	Unpriced  int64
	Decisions int64
	// InputTokens and OutputTokens are what the nodes reported.
	InputTokens, OutputTokens int64
}

const nsPerDay = int64(24 * time.Hour)

// The first and last times a record's at_ns can hold.
var minNano, maxNano = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// unixNano is t as at_ns, held to the years an int64 of nanoseconds
// holds (1677 to 2262): a bound before or after them (0001-01-01,
// 9999-12-31) bounds a window as the first or last time does, where
// UnixNano's wrapped value could put it anywhere.
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minNano):
		return math.MinInt64
	case t.After(maxNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// Usage sums the records of [since, until) by the groups of by (of
// UsageGroups), ordered by them bytewise, whatever the store's
// collation: shadow answers count under no key. It
// first waits for what is queued, as a window does, so an answer given
// before the call is counted.
func (l *Log) Usage(ctx context.Context, since, until time.Time, by []string) ([]Usage, error) {
	// Each row is scanned into u, its groups' columns first.
	var u Usage
	var day, cost int64
	var cols []string
	var dest []any
	for _, g := range by {
		switch g {
		case "key":
			cols, dest = append(cols, "key_name"), append(dest, &u.Key)
		case "model":
			cols, dest = append(cols, "model"), append(dest, &u.Model)
		case "day":
			cols, dest = append(cols, fmt.Sprintf("at_ns / %d", nsPerDay)), append(dest, &day)
		default:
			return nil, fmt.Errorf("usage: group %q is not one of %s", g, strings.Join(UsageGroups, ", "))
		}
	}
	if err := l.Flush(ctx); err != nil {
		return nil, err
	}
	dest = append(dest, &cost, &u.Unpriced, &u.Decisions, &u.InputTokens, &u.OutputTokens)
	sel := "SELECT " + strings.Join(append(cols, "CAST(COALESCE(SUM(cost_picousd), 0) AS BIGINT)",
		"CAST(COALESCE(SUM(CASE WHEN cost_picousd IS NULL THEN 1 ELSE 0 END), 0) AS BIGINT)", "COUNT(*)",
		"CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT)", "CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT)"), ", ") +
		" FROM decisions WHERE at_ns >= ? AND at_ns < ?"
	if len(cols) > 0 {
		sel += " GROUP BY " + strings.Join(cols, ", ")
	}
	var out []Usage
	err := l.store.each(ctx, sel, []any{unixNano(since), unixNano(until)}, func(rows *sql.Rows) error {
		u = Usage{}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		u.Cost = decision.USD(cost)
		if slices.Contains(by, "day") {
			u.Day = time.Unix(0, day*nsPerDay).UTC().Format(time.DateOnly)
		}
		if u.Decisions > 0 {
			out = append(out, u)
		}
		return nil
	})
	// Ordered here, bytewise, not by the store's collation: a PostgreSQL
	// database made with an en_US locale sorts "a" before "B", SQLite
	// after it.
	slices.SortFunc(out, func(a, b Usage) int {
		for _, g := range by {
			var c int
			switch g {
			case "key":
				c = strings.Compare(a.Key, b.Key)
			case "model":
				c = strings.Compare(a.Model, b.Model)
			case "day":
				c = strings.Compare(a.Day, b.Day)
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	return out, err
}
