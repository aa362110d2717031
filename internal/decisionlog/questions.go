package decisionlog

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// The questions asked are kept, with the states, only when the log keeps
// states (Options.KeepStates): a question's instructions and options can
// say as much about the caller's data as the state. They live in a table
// of their own beside the decisions, one row per recorded question, so
// that a replay (system1 replay) can ask a logged question again of
// another model.

func questionsSchema() []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS questions (
			request_id TEXT NOT NULL,
			question_id TEXT NOT NULL,
			at_ns BIGINT NOT NULL,
			question TEXT NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS questions_request ON questions (request_id, question_id)`,
		`CREATE INDEX IF NOT EXISTS questions_at ON questions (at_ns)`,
	}
}

// insertQuestions writes the questions of recs that carry one, in tx.
func (s *store) insertQuestions(ctx context.Context, tx *sql.Tx, recs []Record) error {
	var st *sql.Stmt
	for i := range recs {
		r := &recs[i]
		if r.Question == nil || !s.wrote(i) { // a record left out keeps no question
			continue
		}
		q, err := json.Marshal(r.Question)
		if err != nil {
			continue // a question is as the caller sent it; one that does not encode is not kept
		}
		if st == nil {
			if st, err = tx.PrepareContext(ctx, s.q("INSERT INTO questions (request_id, question_id, at_ns, question) VALUES (?,?,?,?)")); err != nil {
				return err
			}
			defer st.Close()
		}
		if _, err := st.ExecContext(ctx, r.RequestID, cmp.Or(r.QuestionID, DecideQuestion), r.Time.UnixNano(), string(q)); err != nil {
			return err
		}
	}
	return nil
}

// pruneQuestions deletes the questions from before cutoff and, once
// decisions were pruned by count, those older than every decision left.
func (s *store) pruneQuestions(ctx context.Context, cutoff time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.q("DELETE FROM questions WHERE at_ns < ?"), cutoff.UnixNano()); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, "DELETE FROM questions WHERE at_ns < (SELECT MIN(at_ns) FROM decisions)")
	return err
}

// QuestionKey names a recorded question: its request id and question id.
type QuestionKey struct{ RequestID, QuestionID string }

// Replayable reads what a replay asks again, a page at a time, without
// the rest of the window: the latest n requests written from since
// (inclusive) to until (exclusive) whose first record is before the
// record id before (0: from the latest), that kept a state (KeepStates)
// in a record of another model than model and of no shadow. It returns
// their records in the window, in the order written, and their questions
// as asked, by request and question id (the latest where an id was
// reused); next is the before of the page after, 0 when there is none.
func (l *Log) Replayable(ctx context.Context, since, until time.Time, model string, before int64, n int) (es []Entry, qs map[QuestionKey]json.RawMessage, next int64, err error) {
	if err := l.Flush(ctx); err != nil {
		return nil, nil, 0, err
	}
	if before <= 0 {
		before = math.MaxInt64
	}
	var ids []any
	err = l.store.each(ctx, "SELECT request_id, MIN(id) FROM decisions WHERE at_ns >= ? AND at_ns < ? AND state IS NOT NULL AND face <> ? AND model <> ?"+
		" GROUP BY request_id HAVING MIN(id) < ? ORDER BY MIN(id) DESC LIMIT ?", []any{since.UnixNano(), until.UnixNano(), FaceShadow, model, before, n}, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id, &next); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("decision log: replayable: %w", err)
	}
	if len(ids) < n {
		next = 0
	}
	es, err = l.store.requestEntries(ctx, ids, "d.at_ns >= ? AND d.at_ns < ?", since.UnixNano(), until.UnixNano())
	if err != nil {
		return nil, nil, 0, fmt.Errorf("decision log: replayable: %w", err)
	}
	slices.SortFunc(es, func(a, b Entry) int { return cmp.Compare(a.ID, b.ID) })
	qs = map[QuestionKey]json.RawMessage{}
	for chunk := range slices.Chunk(ids, requestsPerQuery) {
		if err := l.store.questionsOf(ctx, chunk, qs); err != nil {
			return nil, nil, 0, fmt.Errorf("decision log: replayable: %w", err)
		}
	}
	return es, qs, next, nil
}

// questionsOf reads into qs the questions of the requests ids.
func (s *store) questionsOf(ctx context.Context, ids []any, qs map[QuestionKey]json.RawMessage) error {
	return s.each(ctx, "SELECT request_id, question_id, question FROM questions WHERE request_id IN "+placeholders(len(ids))+" ORDER BY at_ns", ids, func(rows *sql.Rows) error {
		var k QuestionKey
		var q string
		if err := rows.Scan(&k.RequestID, &k.QuestionID, &q); err != nil {
			return err
		}
		qs[k] = json.RawMessage(q)
		return nil
	})
}
