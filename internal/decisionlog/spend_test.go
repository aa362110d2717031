package decisionlog

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/decision"
)

// A period's bounds are UTC days and calendar months, whatever the
// time's zone: the last day of a year runs into the next.
func TestPeriodBounds(t *testing.T) {
	east := time.FixedZone("UTC+5", 5*3600)
	for _, tc := range []struct {
		per         Period
		at          time.Time
		start, next string
	}{
		{PerDay, time.Date(2026, 12, 4, 23, 59, 59, 0, time.UTC), "2026-12-04T00:00:00Z", "2026-12-05T00:00:00Z"},
		{PerDay, time.Date(2026, 12, 5, 3, 0, 0, 0, east), "2026-12-04T00:00:00Z", "2026-12-05T00:00:00Z"},
		{PerDay, time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC), "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z"},
		{PerMonth, time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{PerMonth, time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), "2027-02-01T00:00:00Z", "2027-03-01T00:00:00Z"},
	} {
		start, next := tc.per.Bounds(tc.at)
		if start.Format(time.RFC3339) != tc.start || next.Format(time.RFC3339) != tc.next {
			t.Errorf("%s of %v: %v to %v; want %s to %s", tc.per, tc.at, start, next, tc.start, tc.next)
		}
	}
}

// clock is a settable time for a log.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// priced is a record of key at t costing usd pico-dollars.
func priced(key string, t time.Time, usd decision.USD) Record {
	r := sample("r-"+key, "q", t)
	r.Key, r.Cost, r.InputTokens, r.OutputTokens = key, &usd, 10, 1
	return r
}

// A key's spend is its records' cost in its period: what the log held
// when Spend was made (another process's, or before a restart), plus
// what is recorded after; a record from before the period, another
// key's, or one without a cost counts nothing; the next period starts
// from 0, and a Refresh reads what another writer added.
func TestSpend(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			clk := &clock{t: time.Date(2026, 12, 31, 10, 0, 0, 0, time.UTC)}
			l := b.open(t, Options{Now: clk.now})
			day := clk.now()
			l.Record(priced("a", day.Add(-11*time.Hour), 1000)) // yesterday
			l.Record(priced("a", day.Add(-time.Hour), 7))
			l.Record(priced("b", day, 5))
			unpriced := sample("r-none", "q", day)
			unpriced.Key = "a"
			l.Record(unpriced)
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var added []string
			sp, err := l.Spend(ctx, map[string]Period{"a": PerDay, "m": PerMonth}, func(key string, usd float64) {
				added = append(added, key)
			})
			if err != nil {
				t.Fatal(err)
			}
			want := func(key string, usd decision.USD, next string) {
				t.Helper()
				got, n, ok := sp.Spent(key)
				if !ok || got != usd || n.Format(time.RFC3339) != next {
					t.Errorf("%s: %v to %v (%v); want %v to %s", key, got, n, ok, usd, next)
				}
			}
			want("a", 7, "2027-01-01T00:00:00Z")
			l.Record(priced("a", day, 3))
			l.Record(priced("m", day, 2))
			l.Record(priced("b", day, 4))
			want("a", 10, "2027-01-01T00:00:00Z")
			want("m", 2, "2027-01-01T00:00:00Z")
			if _, _, ok := sp.Spent("b"); ok {
				t.Error("b, which has no budget, is counted")
			}
			if !reflect.DeepEqual(added, []string{"a", "m", "b"}) {
				t.Errorf("told of %v; want every key's cost as recorded", added)
			}
			// Another writer of the same log: seen at the next Refresh,
			// with what this one recorded meanwhile counted once.
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			other := []Record{priced("a", day, 100)}
			if _, err := l.store.insert(ctx, other, false); err != nil {
				t.Fatal(err)
			}
			want("a", 10, "2027-01-01T00:00:00Z")
			if err := sp.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			want("a", 110, "2027-01-01T00:00:00Z")
			l.Record(priced("a", day, 1))
			want("a", 111, "2027-01-01T00:00:00Z")
			// A new year: a new day and month, from 0.
			clk.set(time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC))
			want("a", 0, "2027-01-02T00:00:00Z")
			want("m", 0, "2027-02-01T00:00:00Z")
			if err := sp.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			want("a", 0, "2027-01-02T00:00:00Z")
		})
	}
}

// Usage sums cost, decisions and tokens by key, model and day; the
// unpriced are counted apart.
func TestUsage(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			d1 := time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC)
			d2 := d1.Add(2 * time.Hour)
			l.Record(priced("a", d1, 5))
			l.Record(priced("a", d2, 7))
			l.Record(priced("b", d2, 11))
			none := sample("r-none", "q", d2)
			none.Model = "m2"
			l.Record(none)
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				by   []string
				want []Usage
			}{
				{nil, []Usage{{Cost: 23, Unpriced: 1, Decisions: 4, InputTokens: 30, OutputTokens: 3}}},
				{[]string{"key"}, []Usage{{Key: "", Unpriced: 1, Decisions: 1}, {Key: "a", Cost: 12, Decisions: 2, InputTokens: 20, OutputTokens: 2},
					{Key: "b", Cost: 11, Decisions: 1, InputTokens: 10, OutputTokens: 1}}},
				{[]string{"day", "model"}, []Usage{{Day: "2026-12-03", Model: "m1", Cost: 5, Decisions: 1, InputTokens: 10, OutputTokens: 1},
					{Day: "2026-12-04", Model: "m1", Cost: 18, Decisions: 2, InputTokens: 20, OutputTokens: 2},
					{Day: "2026-12-04", Model: "m2", Unpriced: 1, Decisions: 1}}},
			} {
				got, err := l.Usage(ctx, d1.Add(-time.Hour), d2.Add(time.Hour), tc.by)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("by %v:\n got %+v\nwant %+v", tc.by, got, tc.want)
				}
			}
			if got, err := l.Usage(ctx, d2.Add(time.Hour), d2.Add(2*time.Hour), []string{"key"}); err != nil || len(got) != 0 {
				t.Errorf("an empty window: %+v, %v", got, err)
			}
			if _, err := l.Usage(ctx, d1, d2, []string{"node"}); err == nil {
				t.Error("a group by node was taken")
			}
		})
	}
}

// Usage's groups come in bytewise order whatever the store's collation
// (a PostgreSQL database made with an en_US locale sorts "a" before
// "B"): every store answers one order.
func TestUsageOrderIsBytewise(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
			for _, k := range []string{"b", "a", "B", "_x", "Z"} {
				r := priced(k, at, 1)
				r.Model = "m-" + k
				l.Record(r)
			}
			for _, by := range [][]string{{"key"}, {"model"}, {"day", "key"}} {
				got, err := l.Usage(ctx, at.Add(-time.Hour), at.Add(time.Hour), by)
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, u := range got {
					keys = append(keys, u.Key+strings.TrimPrefix(u.Model, "m-")) // one of them, as by has it
				}
				if want := []string{"B", "Z", "_x", "a", "b"}; !slices.Equal(keys, want) {
					t.Errorf("by %v: %q, want %q", by, keys, want)
				}
			}
		})
	}
}

// A log made before records named their key gains key_name and the
// token columns, its rows under no key.
func TestKeyColumnsAdded(t *testing.T) {
	at := time.Now()
	path := oldLog(t, ",\n\t\t\tkey_name TEXT NOT NULL DEFAULT '',\n\t\t\tinput_tokens BIGINT NOT NULL DEFAULT 0,\n\t\t\toutput_tokens BIGINT NOT NULL DEFAULT 0",
		`INSERT INTO decisions (request_id, question_id, at_ns, face, model, node, kind, options, engine_dist, steps, final_dist, latency_us, state_sha256, cost_picousd)
		VALUES ('old', 'q', ?, 'systemone', 'm1', 'n1', 'choice', '["a","b"]', '[0.6,0.4]', '[]', '[0.6,0.4]', 1, '', 9)`, at.UnixNano())
	l := openLog(t, Options{Path: path})
	ctx := ctxT(t)
	l.Record(priced("a", at, 5))
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := l.Usage(ctx, at.Add(-time.Minute), at.Add(time.Minute), []string{"key"})
	want := []Usage{{Cost: 9, Decisions: 1}, {Key: "a", Cost: 5, Decisions: 1, InputTokens: 10, OutputTokens: 1}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%+v, %v; want %+v", got, err, want)
	}
}

// A Refresh while this process's records are still queued (the writer
// lingering) keeps counting them: the log does not hold them yet, and a
// key that has spent its budget must not read as under it until the
// next Refresh. Once written they are counted once.
func TestSpendRefreshCountsWhatIsQueued(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{Linger: time.Hour})
			now := time.Now()
			sp, err := l.Spend(ctx, map[string]Period{"a": PerDay}, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := func(when string, usd decision.USD) {
				t.Helper()
				if got, _, _ := sp.Spent("a"); got != usd {
					t.Errorf("%s: spent %v; want %v", when, got, usd)
				}
			}
			l.Record(priced("a", now, 5))
			want("recorded", 5)
			if err := sp.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			want("refreshed while queued", 5)
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			want("written", 5)
			if err := sp.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			want("refreshed once written", 5)
		})
	}
}

// Usage counts what was recorded before it was asked, though the writer
// still holds it, as a window does: an answer given is in the usage read
// after it.
func TestUsageCountsWhatIsQueued(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{Linger: time.Hour})
			at := time.Now()
			l.Record(priced("a", at, 5))
			got, err := l.Usage(ctx, at.Add(-time.Minute), at.Add(time.Minute), nil)
			want := []Usage{{Cost: 5, Decisions: 1, InputTokens: 10, OutputTokens: 1}}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%+v, %v; want %+v", got, err, want)
			}
		})
	}
}
