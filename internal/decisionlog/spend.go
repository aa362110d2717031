package decisionlog

import (
	"context"
	"database/sql"
	"sync"
	"time"

	"system1/internal/decision"
)

// Period is a budget's period, in UTC: a key's spend starts again from
// 0 at each one's start.
type Period string

// The periods a budget may have (config.BudgetPeriods).
const (
	PerDay   Period = "day"
	PerMonth Period = "month"
)

// Bounds are the start of the period that holds t and the start of the
// next, in UTC.
func (p Period) Bounds(t time.Time) (start, next time.Time) {
	t = t.UTC()
	if p == PerMonth {
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}

// Spend is what each key with a budget has spent in its current period:
// the sum of its records' cost in the log, read when it is made and
// every Refresh after, plus what this process recorded and had not
// written when the read began. A restart reads it again, so forgets nothing the log holds;
// replicas over one PostgreSQL log see each other's spend at the next
// Refresh, so one replica may go on spending for up to the refresh
// interval (and the writer's linger) past the budget the others have
// spent: docs/http-api.md#budgets states the bound.
type Spend struct {
	log *Log
	now func() time.Time
	// added is told what each key's answer cost as it is recorded (a
	// metric); nil for none.
	added func(key string, usd float64)

	mu   sync.Mutex
	keys map[string]*keySpend
}

// keySpend is one key's spend in its period: base, the log's sum at the
// last read, and what this process recorded since the period began
// (added), less what its writer had committed when that read began
// (mark), which the read counts. What is recorded and still queued is
// in added and not in mark, so a read that does not see it yet does not
// take it away; what was dropped, never written, stays counted.
type keySpend struct {
	per                        Period
	start                      time.Time
	base, added, written, mark decision.USD
}

// holds reports whether a record at t falls in k's period, rolled to
// the one that holds now.
func (k *keySpend) holds(t, now time.Time) bool {
	k.roll(now)
	start, _ := k.per.Bounds(t)
	return start.Equal(k.start)
}

// roll starts the period that holds now when it is not k's.
func (k *keySpend) roll(now time.Time) {
	if start, _ := k.per.Bounds(now); !start.Equal(k.start) {
		*k = keySpend{per: k.per, start: start}
	}
}

// Spend counts the spend of keys (by name, each with its budget's
// period) from the log's records, reading what the log holds of their
// current periods now. added, when not nil, is told each cost as it is
// recorded. A nil Log counts what is recorded alone.
func (l *Log) Spend(ctx context.Context, keys map[string]Period, added func(key string, usd float64)) (*Spend, error) {
	now := time.Now
	if l != nil {
		now = l.opt.Now
	}
	s := &Spend{log: l, now: now, added: added, keys: map[string]*keySpend{}}
	for name, per := range keys {
		start, _ := per.Bounds(s.now())
		s.keys[name] = &keySpend{per: per, start: start}
	}
	if l != nil {
		l.spend.Store(s)
	}
	return s, s.Refresh(ctx)
}

// add counts cost against key, recorded at t, reporting whether it was
// counted in the key's period.
func (s *Spend) add(key string, t time.Time, cost decision.USD) bool {
	if s.added != nil {
		s.added(key, cost.Dollars())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[key]
	if !ok || !k.holds(t, s.now()) {
		return false
	}
	k.added += cost
	return true
}

// wrote counts the records of batch that the writer committed (written
// reports which) and add counted against their keys.
func (s *Spend) wrote(batch []Record, written func(i int) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for i := range batch {
		r := &batch[i]
		if !r.spent || !written(i) {
			continue
		}
		if k, ok := s.keys[r.Key]; ok && k.holds(r.Time, now) {
			k.written += *r.Cost
		}
	}
}

// Spent is what key has spent in the period that holds now, and when
// the next begins; ok is false for a key Spend does not count.
func (s *Spend) Spent(key string) (spent decision.USD, next time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[key]
	if !ok {
		return 0, time.Time{}, false
	}
	k.roll(s.now())
	_, next = k.per.Bounds(k.start)
	return k.base + k.added - k.mark, next, true
}

// Refresh reads each key's spend in its current period from the log: one
// query a period.
func (s *Spend) Refresh(ctx context.Context) error {
	if s.log == nil {
		return nil
	}
	type read struct {
		start time.Time
		names []string
	}
	s.mu.Lock()
	now := s.now()
	reads := map[Period]*read{}
	marks := map[string]decision.USD{}
	for name, k := range s.keys {
		k.roll(now)
		r := reads[k.per]
		if r == nil {
			r = &read{start: k.start}
			reads[k.per] = r
		}
		r.names = append(r.names, name)
		marks[name] = k.written
	}
	s.mu.Unlock()
	for _, r := range reads {
		sums, err := s.log.store.spent(ctx, r.names, r.start)
		if err != nil {
			return err
		}
		s.mu.Lock()
		for _, name := range r.names {
			if k := s.keys[name]; k.start.Equal(r.start) {
				k.base, k.mark = sums[name], marks[name]
			}
		}
		s.mu.Unlock()
	}
	return nil
}

// Run refreshes the spend every interval until ctx ends; a read that
// fails keeps the last one's, and is logged.
func (s *Spend) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				s.log.opt.Logger.Warn("decision log: reading the keys' spend", "err", err)
			}
		}
	}
}

// spent sums the cost of names' records since start, by name.
func (s *store) spent(ctx context.Context, names []string, since time.Time) (map[string]decision.USD, error) {
	args := []any{since.UnixNano()}
	for _, n := range names {
		args = append(args, n)
	}
	out := map[string]decision.USD{}
	err := s.each(ctx, `SELECT key_name, CAST(COALESCE(SUM(cost_picousd), 0) AS BIGINT) FROM decisions
		WHERE at_ns >= ? AND key_name IN `+placeholders(len(names))+` GROUP BY key_name`, args, func(rows *sql.Rows) error {
		var name string
		var sum int64
		if err := rows.Scan(&name, &sum); err != nil {
			return err
		}
		out[name] = decision.USD(sum)
		return nil
	})
	return out, err
}
