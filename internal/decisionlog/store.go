package decisionlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"system1/internal/decision"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver, pure Go
)

// store is the SQL both backends share; they differ in the driver, the
// schema's id column and how parameters are written.
type store struct {
	db       *sql.DB
	postgres bool
}

// columns of the decisions table, in insert order.
const columns = "request_id, question_id, at_ns, face, model, node, kind, options, engine_dist, steps, final_dist, label_mass, latency_us, state_sha256, state"

const numColumns = 15

// rowsPerInsert bounds the rows of one INSERT, well under both backends'
// limits on parameters (SQLite 32766, PostgreSQL 65535).
const rowsPerInsert = 64

func schema(postgres bool) []string {
	id, real := "INTEGER PRIMARY KEY AUTOINCREMENT", "REAL"
	if postgres {
		id, real = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "DOUBLE PRECISION"
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS decisions (
			id ` + id + `,
			request_id TEXT NOT NULL,
			question_id TEXT NOT NULL,
			at_ns BIGINT NOT NULL,
			face TEXT NOT NULL,
			model TEXT NOT NULL,
			node TEXT NOT NULL,
			kind TEXT NOT NULL,
			options TEXT NOT NULL,
			engine_dist TEXT NOT NULL,
			steps TEXT NOT NULL,
			final_dist TEXT NOT NULL,
			label_mass ` + real + `,
			latency_us BIGINT NOT NULL,
			state_sha256 TEXT NOT NULL,
			state TEXT
		)`,
		`CREATE INDEX IF NOT EXISTS decisions_request ON decisions (request_id, question_id)`,
		`CREATE INDEX IF NOT EXISTS decisions_at ON decisions (at_ns)`,
		`CREATE TABLE IF NOT EXISTS outcomes (
			id ` + id + `,
			request_id TEXT NOT NULL,
			question_id TEXT NOT NULL,
			outcome TEXT NOT NULL,
			at_ns BIGINT NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS outcomes_question ON outcomes (request_id, question_id, id)`,
		`CREATE INDEX IF NOT EXISTS outcomes_at ON outcomes (at_ns)`,
	}
}

// openSQLite opens (creating) the file at path. WAL with synchronous
// NORMAL commits without an fsync per transaction and survives a killed
// process: a transaction is in the WAL before COMMIT returns, and an
// incomplete one is ignored on the next open. Only a power loss can undo
// the last commits, never corrupt the file. One connection serialises
// the writer and the readers, so no call waits on SQLITE_BUSY.
func openSQLite(ctx context.Context, path string) (*store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("decision log: %w", err)
		}
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("decision log %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &store{db: db}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("decision log %s: %w", path, err)
	}
	return s, nil
}

// openPostgres connects to url. The error never repeats the URL, which may
// hold a password.
func openPostgres(ctx context.Context, url string) (*store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, errors.New("decision log: the PostgreSQL url does not parse")
	}
	db.SetMaxOpenConns(4)
	s := &store{db: db, postgres: true}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("decision log on PostgreSQL: %w", err)
	}
	return s, nil
}

// init creates the schema if it is not there. On PostgreSQL, replicas
// starting at once would race on CREATE TABLE IF NOT EXISTS (it is not
// atomic against itself there), so a transaction-scoped advisory lock
// orders them.
func (s *store) init(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7315560401)"); err != nil {
			return err
		}
	}
	for _, q := range schema(s.postgres) {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// q rewrites ? placeholders as $1, $2... for PostgreSQL.
func (s *store) q(query string) string {
	if !s.postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// insert writes records in one transaction. A record that cannot be
// encoded (a NaN in a distribution) is left out and counted in bad, so it
// does not cost the batch.
func (s *store) insert(ctx context.Context, recs []Record, keepStates bool) (bad int, err error) {
	rows := make([][]any, 0, len(recs))
	for i := range recs {
		row, err := rowArgs(&recs[i], keepStates)
		if err != nil {
			bad++
			continue
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return bad, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return bad, err
	}
	defer tx.Rollback()
	for start := 0; start < len(rows); start += rowsPerInsert {
		chunk := rows[start:min(start+rowsPerInsert, len(rows))]
		var b strings.Builder
		b.WriteString("INSERT INTO decisions (" + columns + ") VALUES ")
		args := make([]any, 0, len(chunk)*numColumns)
		for i, row := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
			args = append(args, row...)
		}
		if _, err := tx.ExecContext(ctx, s.q(b.String()), args...); err != nil {
			return bad, err
		}
	}
	return bad, tx.Commit()
}

func rowArgs(r *Record, keepStates bool) ([]any, error) {
	enc := func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}
	opts, err := enc(nonNil(r.Options))
	if err != nil {
		return nil, err
	}
	eng, err := enc(nonNil(r.EngineDist))
	if err != nil {
		return nil, fmt.Errorf("engine distribution: %w", err)
	}
	steps, err := enc(nonNil(r.Steps))
	if err != nil {
		return nil, fmt.Errorf("steps: %w", err)
	}
	fin, err := enc(nonNil(r.final()))
	if err != nil {
		return nil, fmt.Errorf("final distribution: %w", err)
	}
	var mass any
	if r.LabelMass != nil {
		mass = *r.LabelMass
	}
	hash := r.StateHash
	if hash == "" {
		hash = HashState(r.State)
	}
	var state any
	if keepStates && r.State != nil {
		state = string(r.State)
	}
	return []any{r.RequestID, r.QuestionID, r.Time.UnixNano(), r.Face, r.Model, r.Node, string(r.Kind),
		opts, eng, steps, fin, mass, r.Latency.Microseconds(), hash, state}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// selectEntry reads a decisions row with its latest outcome and the
// number of outcomes.
const selectEntry = `SELECT d.id, ` + columns + `,
	(SELECT o.outcome FROM outcomes o WHERE o.request_id = d.request_id AND o.question_id = d.question_id ORDER BY o.id DESC LIMIT 1),
	(SELECT o.at_ns FROM outcomes o WHERE o.request_id = d.request_id AND o.question_id = d.question_id ORDER BY o.id DESC LIMIT 1),
	(SELECT COUNT(*) FROM outcomes o WHERE o.request_id = d.request_id AND o.question_id = d.question_id)
	FROM decisions d `

func (s *store) entries(ctx context.Context, where string, args ...any) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx, s.q(selectEntry+where), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var kind, opts, eng, steps, fin string
		var atNS, latUS int64
		var mass sql.NullFloat64
		var state, outcome sql.NullString
		var outAt sql.NullInt64
		if err := rows.Scan(&e.ID, &e.RequestID, &e.QuestionID, &atNS, &e.Face, &e.Model, &e.Node, &kind,
			&opts, &eng, &steps, &fin, &mass, &latUS, &e.StateHash, &state, &outcome, &outAt, &e.Outcomes); err != nil {
			return nil, err
		}
		e.Time = time.Unix(0, atNS).UTC()
		e.Kind = decision.Kind(kind)
		e.Latency = time.Duration(latUS) * time.Microsecond
		for _, f := range []struct {
			raw string
			to  any
		}{{opts, &e.Options}, {eng, &e.EngineDist}, {steps, &e.Steps}, {fin, &e.Final}} {
			if err := json.Unmarshal([]byte(f.raw), f.to); err != nil {
				return nil, fmt.Errorf("row %d: %w", e.ID, err)
			}
		}
		if mass.Valid {
			m := mass.Float64
			e.LabelMass = &m
		}
		if state.Valid {
			e.State = json.RawMessage(state.String)
		}
		if outcome.Valid {
			e.Outcome = &Outcome{Value: outcome.String, Time: time.Unix(0, outAt.Int64).UTC()}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *store) addOutcome(ctx context.Context, requestID, questionID, value string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q("INSERT INTO outcomes (request_id, question_id, outcome, at_ns) VALUES (?,?,?,?)"),
		requestID, questionID, value, at.UnixNano())
	return err
}

// prune deletes decisions and outcomes from before cutoff, then the
// oldest decisions beyond maxRows, and returns how many decisions went.
func (s *store) prune(ctx context.Context, cutoff time.Time, maxRows int64) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q("DELETE FROM decisions WHERE at_ns < ?"), cutoff.UnixNano())
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	if _, err := s.db.ExecContext(ctx, s.q("DELETE FROM outcomes WHERE at_ns < ?"), cutoff.UnixNano()); err != nil {
		return n, err
	}
	if maxRows > 0 {
		res, err := s.db.ExecContext(ctx, s.q(
			"DELETE FROM decisions WHERE id <= (SELECT id FROM decisions ORDER BY id DESC LIMIT 1 OFFSET ?)"), maxRows)
		if err != nil {
			return n, err
		}
		m, _ := res.RowsAffected()
		n += m
	}
	return n, nil
}

func (s *store) close() error { return s.db.Close() }
