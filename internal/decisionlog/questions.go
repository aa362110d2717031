package decisionlog

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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
		if r.Question == nil {
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

// Questions returns the questions kept (with KeepStates) for the records
// written from since (inclusive) to until (exclusive), by request and
// question id; the latest one where an id was reused.
func (l *Log) Questions(ctx context.Context, since, until time.Time) (map[QuestionKey]json.RawMessage, error) {
	if err := l.Flush(ctx); err != nil {
		return nil, err
	}
	rows, err := l.store.db.QueryContext(ctx, l.store.q("SELECT request_id, question_id, question FROM questions WHERE at_ns >= ? AND at_ns < ? ORDER BY at_ns"),
		since.UnixNano(), until.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("decision log: questions: %w", err)
	}
	defer rows.Close()
	out := map[QuestionKey]json.RawMessage{}
	for rows.Next() {
		var k QuestionKey
		var q string
		if err := rows.Scan(&k.RequestID, &k.QuestionID, &q); err != nil {
			return nil, fmt.Errorf("decision log: questions: %w", err)
		}
		out[k] = json.RawMessage(q)
	}
	return out, rows.Err()
}
