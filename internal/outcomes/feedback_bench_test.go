package outcomes

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkFeedback measures Feedback.Record alone: a batch of 1 and of
// 100 outcomes (ns/op is per batch) on a log of 1,000 labelled outcomes
// and the spare answers they are for, on SQLite and on PostgreSQL where
// SYSTEM1_POSTGRES_URL names one. BenchmarkCalibrationLog measures the
// batch of 100 on larger logs.
func BenchmarkFeedback(b *testing.B) {
	for _, be := range benchBackends() {
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
