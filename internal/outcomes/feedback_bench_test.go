package outcomes

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"system1/internal/decisionlog"
	"system1/internal/testengine"
)

// BenchmarkFeedback measures Feedback.Record alone: a batch of 1 and of
// 100 outcomes (ns/op is per batch) on a log of 1,000 labelled outcomes
// and the spare answers they are for, on SQLite and on PostgreSQL where
// SYSTEM1_POSTGRES_URL names one. BenchmarkCalibrationLog measures the
// batch of 100 on larger logs.
func BenchmarkFeedback(b *testing.B) {
	for _, be := range []struct {
		name string
		open func(b *testing.B) (decisionlog.Options, *sql.DB)
	}{
		{"sqlite", func(b *testing.B) (decisionlog.Options, *sql.DB) {
			opt := decisionlog.Options{Path: filepath.Join(b.TempDir(), "decisions.db")}
			l, err := decisionlog.Open(context.Background(), opt) // makes the file for the second connection
			if err != nil {
				b.Fatal(err)
			}
			_ = l.Close(context.Background())
			db, err := sql.Open("sqlite", "file:"+opt.Path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return opt, db
		}},
		{"postgres", func(b *testing.B) (decisionlog.Options, *sql.DB) {
			u := testengine.PostgresSchema(b, "bench_")
			db, err := sql.Open("pgx", u)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return decisionlog.Options{URL: u}, db
		}},
	} {
		b.Run(be.name, func(b *testing.B) {
			opt, db := be.open(b)
			l, spares := populate(b, opt, db, 1000)
			fb := NewFeedback(l)
			ctx := context.Background()
			next := 0
			for _, size := range []int{1, 100} {
				b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
					for b.Loop() {
						if next+size > len(spares) {
							b.Fatal("out of spare answers")
						}
						items := spares[next : next+size]
						next += size
						if res := fb.Record(ctx, items); res.Error != nil {
							b.Fatal(res.Error.Message)
						}
					}
				})
			}
		})
	}
}
