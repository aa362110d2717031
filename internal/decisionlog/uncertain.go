package decisionlog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Uncertain is a span of time in which a node may have served a model
// from either of two builds: from the last canary that confirmed the
// build Was to the probe that found it changed to Now
// (docs/fingerprints.md, Swap hygiene). Answers of that node and model
// in it, and answers after it still stamped Was, are kept out of every
// refit: they carry Was's fingerprint but may be Now's answers.
type Uncertain struct {
	Node, Model string
	From, To    time.Time
	Was, Now    string
}

// uncertainSchema is the table of uncertain windows, one row a change of
// build seen by any process sharing the log; a handful a swap, never
// pruned.
func uncertainSchema() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS uncertain (
			node TEXT NOT NULL,
			model TEXT NOT NULL,
			from_ns BIGINT NOT NULL,
			to_ns BIGINT NOT NULL,
			was_fingerprint TEXT NOT NULL,
			now_fingerprint TEXT NOT NULL
		)`,
	}
}

// RecordUncertain keeps the window in which node may have served model
// from either of two builds, at once (not through the writer's batches),
// for the refits of every process sharing the log.
func (l *Log) RecordUncertain(ctx context.Context, node, model string, from, to time.Time, was, now string) error {
	_, err := l.store.db.ExecContext(ctx, l.store.q("INSERT INTO uncertain (node, model, from_ns, to_ns, was_fingerprint, now_fingerprint) VALUES (?,?,?,?,?,?)"),
		node, model, from.UnixNano(), to.UnixNano(), was, now)
	if err != nil {
		return fmt.Errorf("decision log: uncertain window: %w", err)
	}
	return nil
}

// Uncertain returns every uncertain window recorded, by the time it ends.
func (l *Log) Uncertain(ctx context.Context) ([]Uncertain, error) {
	var out []Uncertain
	err := l.store.each(ctx, "SELECT node, model, from_ns, to_ns, was_fingerprint, now_fingerprint FROM uncertain ORDER BY to_ns", nil, func(rows *sql.Rows) error {
		var u Uncertain
		var from, to int64
		if err := rows.Scan(&u.Node, &u.Model, &from, &to, &u.Was, &u.Now); err != nil {
			return err
		}
		u.From, u.To = time.Unix(0, from), time.Unix(0, to)
		out = append(out, u)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decision log: uncertain windows: %w", err)
	}
	return out, nil
}

// InUncertain reports whether an answer of model by node, stamped with
// build fp at time at (ns), is one a swap left uncertain: inside a window
// of that node and model, or after the latest such window before it and
// still stamped with the build that window found replaced (an answer of
// a process that had not seen the change yet, or that read its build
// just before it did). An answer stamped with either build of a window
// is of its model whatever name it was recorded under (the model id an
// upstream's answers carry, Ollama's "m" for "m:latest"). ws are by
// their end, as Uncertain returns them.
func InUncertain(ws []Uncertain, node, model, fp string, at int64) bool {
	var before *Uncertain
	for i := range ws {
		w := &ws[i]
		if w.Node != node || (w.Model != model && (fp == "" || fp != w.Was && fp != w.Now)) {
			continue
		}
		if at >= w.From.UnixNano() && at <= w.To.UnixNano() {
			return true
		}
		if w.To.UnixNano() < at {
			before = w
		}
	}
	return before != nil && before.Was != before.Now && fp == before.Was
}
