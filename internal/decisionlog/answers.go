package decisionlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"system1/internal/decision"
)

// Answer is a record as label-free drift reads it: what EachAnswer and
// AnswersAfter read of each record, without the rest.
type Answer struct {
	ID int64
	// At is the decision time, in nanoseconds since the epoch.
	At    int64
	Face  string
	Model string
	Kind  decision.Kind
	// Options are the question's options, shared by the answers of one
	// read that have the same: not to be changed.
	Options []string
	// Dist is Entry.Uncalibrated: what the engine answered, after debias
	// and prior but before any calibrator, so that drift measures the
	// model and not system1's own refits.
	Dist decision.Distribution
}

// answersSpan is the span of decision time one query of EachAnswer
// reads: a read of a day goes in steps, so that the writer and feedback,
// which share SQLite's one connection, run between them.
const answersSpan = 10 * time.Minute

// EachAnswer calls fn with every record whose decision time is in
// [since, until), in no set order. Of each record it reads only the
// columns an Answer holds. It reads the records this process has queued
// first. fn is called while a query's rows are open: it must not use the
// log.
func (l *Log) EachAnswer(ctx context.Context, since, until time.Time, fn func(Answer)) error {
	if err := l.Flush(ctx); err != nil {
		return err
	}
	r := answerReader{opts: map[string][]string{}}
	for from := since.UnixNano(); from < until.UnixNano(); from += int64(answersSpan) {
		to := min(from+int64(answersSpan), until.UnixNano())
		if err := r.read(ctx, l.store, "WHERE at_ns >= ? AND at_ns < ?", []any{from, to}, fn); err != nil {
			return fmt.Errorf("decision log: answers: %w", err)
		}
	}
	return nil
}

// AnswersAfter calls fn with the records of id after after (0: from the
// first), at most limit of them, in id order, and returns the last one's
// id (after when there is none) and how many there were. It reads the
// records this process has queued first. On PostgreSQL ids are taken
// when a transaction inserts, so a record of another process may commit
// after one of a larger id: a reader that follows the log by id must
// look again below the last id it read (see outcomes' drift). fn must
// not use the log, as for EachAnswer.
func (l *Log) AnswersAfter(ctx context.Context, after int64, limit int, fn func(Answer)) (last int64, n int, err error) {
	if err := l.Flush(ctx); err != nil {
		return after, 0, err
	}
	last = after
	r := answerReader{opts: map[string][]string{}}
	err = r.read(ctx, l.store, "WHERE id > ? ORDER BY id LIMIT ?", []any{after, max(limit, 1)}, func(a Answer) {
		last, n = a.ID, n+1
		fn(a)
	})
	if err != nil {
		return after, 0, fmt.Errorf("decision log: answers: %w", err)
	}
	return last, n, nil
}

// answerReader reads Answers, each set of options decoded once.
type answerReader struct {
	opts map[string][]string // by the options column's JSON
}

func (r *answerReader) read(ctx context.Context, s *store, where string, args []any, fn func(Answer)) error {
	var kind string
	var opts, eng, steps sql.RawBytes // valid until the next row: parsed before it
	return s.each(ctx, "SELECT id, at_ns, face, model, kind, options, engine_dist, steps FROM decisions "+where, args, func(rows *sql.Rows) error {
		var a Answer
		if err := rows.Scan(&a.ID, &a.At, &a.Face, &a.Model, &kind, &opts, &eng, &steps); err != nil {
			return err
		}
		a.Kind = decision.Kind(kind)
		var ok bool
		if a.Options, ok = r.opts[string(opts)]; !ok {
			if err := json.Unmarshal(opts, &a.Options); err != nil {
				return fmt.Errorf("row %d: %w", a.ID, err)
			}
			r.opts[string(opts)] = a.Options
		}
		// The distribution before the first temperature step, read as
		// parseCase reads it where the columns are in the writer's form,
		// else as decodeCase does.
		dist, ok := parseSteps(steps)
		if dist == nil {
			dist = eng
		}
		if end, fine := floatsEnd(dist, skipSpace(dist, 0)); ok && fine && skipSpace(dist, end) == len(dist) {
			a.Dist = parseFloats(dist)
		} else {
			var c Case
			if err := decodeCase(&c, opts, eng, steps, ""); err != nil {
				return fmt.Errorf("row %d: %w", a.ID, err)
			}
			a.Dist = c.Dist
		}
		fn(a)
		return nil
	})
}
