package decisionlog

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"system1/internal/decision"
)

// store is the SQL both backends share; they differ in the driver, the
// schema's id column and how parameters are written.
type store struct {
	db       *sql.DB
	postgres bool
	// inserts are the prepared INSERTs of 1, 2, 4 ... rowsPerInsert rows,
	// by row count, made on first use: parsing an INSERT of many rows
	// costs as much as running it. Only the writer inserts.
	inserts map[int]*sql.Stmt
	// The writer's buffers, reused from batch to batch (see encode).
	buf   []byte
	texts [][5][2]int
	args  []any
	// lastID is the id of the last row the writer's last insert made, 0
	// where it is not known (PostgreSQL, or nothing inserted): on SQLite
	// the rows of one transaction take consecutive ids (Log.Follow).
	lastID int64
	// file is the SQLite file as opened, nil on PostgreSQL: what its
	// path names later is compared with it (Log.Gone).
	file os.FileInfo
}

// columns of the decisions table, in insert order.
const columns = "request_id, question_id, at_ns, face, model, node, kind, options, engine_dist, steps, final_dist, label_mass, latency_us, state_sha256, state, fingerprint, cost_picousd, cascade_model, cascade_stage, key_name, input_tokens, output_tokens"

const numColumns = 22

// rowPlaceholders is one row's parameters in an INSERT.
var rowPlaceholders = "(" + strings.Repeat("?,", numColumns-1) + "?)"

// rowsPerInsert bounds the rows of one INSERT, well under both backends'
// limits on parameters (SQLite 32766, PostgreSQL 65535); a power of two
// (see insert).
const rowsPerInsert = 64

func schema(postgres bool) []string {
	id, real := "INTEGER PRIMARY KEY AUTOINCREMENT", "REAL"
	if postgres {
		id, real = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "DOUBLE PRECISION"
	}
	return append([]string{
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
			state TEXT,
			fingerprint TEXT NOT NULL DEFAULT '',
			cost_picousd BIGINT,
			cascade_model TEXT NOT NULL DEFAULT '',
			cascade_stage INTEGER NOT NULL DEFAULT 0,
			key_name TEXT NOT NULL DEFAULT '',
			input_tokens BIGINT NOT NULL DEFAULT 0,
			output_tokens BIGINT NOT NULL DEFAULT 0
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
	}, append(questionsSchema(), uncertainSchema()...)...)
}

// openSQLite opens (creating) the file at path. WAL with synchronous
// NORMAL commits without an fsync per transaction and survives a killed
// process: a transaction is in the WAL before COMMIT returns, and an
// incomplete one is ignored on the next open. Only a power loss can undo
// the last commits, never corrupt the file. One connection serialises
// the writer and the readers, so no call waits on SQLITE_BUSY. Its page
// cache is 512 KiB, not SQLite's 2 MB: the writer appends at the end of
// the table and its indexes, and the readers' windows run past any cache,
// so the larger one held 3 MiB more resident for nothing measurable
// (docs/benchmarks.md).
func openSQLite(ctx context.Context, path string) (*store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("decision log: %w", err)
		}
	}
	if err := linked(sqliteDriver); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_pragma=cache_size(-512)"
	db, err := sql.Open(sqliteDriver, dsn)
	if err != nil {
		return nil, fmt.Errorf("decision log %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &store{db: db}
	if err := s.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("decision log %s: %w", path, err)
	}
	if s.file, err = os.Stat(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("decision log: %w", err)
	}
	return s, nil
}

// openPostgres connects to url. The error never repeats the URL, which may
// hold a password.
func openPostgres(ctx context.Context, url string) (*store, error) {
	if err := linked(postgresDriver); err != nil {
		return nil, err
	}
	db, err := sql.Open(postgresDriver, url)
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
		if err := s.create(ctx, tx, q); err != nil {
			return err
		}
	}
	// Columns added since the table was first made: rows from before
	// read as answered by an unknown build, at an unknown cost (NULL), of
	// no cascade, no key and no tokens.
	for _, col := range []struct{ name, decl string }{
		{"fingerprint", "TEXT NOT NULL DEFAULT ''"},
		{"cost_picousd", "BIGINT"},
		// Not named cascade: a keyword in SQLite and PostgreSQL alike.
		{"cascade_model", "TEXT NOT NULL DEFAULT ''"},
		{"cascade_stage", "INTEGER NOT NULL DEFAULT 0"},
		{"key_name", "TEXT NOT NULL DEFAULT ''"},
		{"input_tokens", "BIGINT NOT NULL DEFAULT 0"},
		{"output_tokens", "BIGINT NOT NULL DEFAULT 0"},
	} {
		if err := s.addColumn(ctx, tx, col.name, col.decl); err != nil {
			return err
		}
	}
	// A key's spend this period is read by its name and time (spend.go).
	if err := s.create(ctx, tx, "CREATE INDEX IF NOT EXISTS decisions_key_at ON decisions (key_name, at_ns)"); err != nil {
		return err
	}
	return tx.Commit()
}

// create runs q, a CREATE ... IF NOT EXISTS of the schema, unless on
// PostgreSQL the table or index it makes is there already: CREATE INDEX
// IF NOT EXISTS takes its table's SHARE lock before it looks, so a
// replica starting while another's long write (a prune of many rows)
// holds the table would wait for it, and every replica's writes would
// queue behind that wait.
func (s *store) create(ctx context.Context, tx *sql.Tx, q string) error {
	if _, rest, ok := strings.Cut(q, "IF NOT EXISTS "); s.postgres && ok {
		name, _, _ := strings.Cut(rest, " ")
		var n int
		err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_class WHERE relname = $1 AND relnamespace = current_schema()::regnamespace", name).Scan(&n)
		if err != nil || n > 0 {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, q)
	return err
}

// addColumn adds a column to a decisions table made before it. It looks
// first, on PostgreSQL too: ALTER TABLE takes the table's ACCESS
// EXCLUSIVE lock even when the column is there, so a replica starting
// while another reads the log for long (a pg_dump holds its read lock for
// the whole dump) would wait on it, and every other replica's writes and
// reads would queue behind that wait.
func (s *store) addColumn(ctx context.Context, tx *sql.Tx, name, decl string) error {
	has := "SELECT COUNT(*) FROM pragma_table_info('decisions') WHERE name = ?"
	if s.postgres {
		has = "SELECT COUNT(*) FROM pg_attribute WHERE attrelid = 'decisions'::regclass AND attname = $1 AND NOT attisdropped"
	}
	var n int
	if err := tx.QueryRowContext(ctx, has, name).Scan(&n); err != nil || n > 0 {
		return err
	}
	_, err := tx.ExecContext(ctx, "ALTER TABLE decisions ADD COLUMN "+name+" "+decl)
	return err
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
// encoded (a NaN in a distribution, or on PostgreSQL a NUL in a text) is
// left out and counted in bad, so it does not cost the batch.
func (s *store) insert(ctx context.Context, recs []Record, keepStates bool) (bad int, err error) {
	s.lastID = 0
	args, bad := s.encode(recs, keepStates)
	defer clear(args) // the batch's text is not kept past its transaction
	rows := len(args) / numColumns
	if rows == 0 {
		return bad, nil
	}
	// The largest prepared sizes that fit: 100 rows are inserted 64, 32
	// and 4 at a time. They are prepared before the transaction, which
	// holds SQLite's one connection.
	var sizes []int
	for left := rows; left > 0; left -= sizes[len(sizes)-1] {
		n := rowsPerInsert
		for n > left {
			n /= 2
		}
		if _, err := s.insertStmt(ctx, n); err != nil {
			return bad, err
		}
		sizes = append(sizes, n)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return bad, err
	}
	defer tx.Rollback()
	var last int64
	for _, n := range sizes {
		res, err := tx.StmtContext(ctx, s.inserts[n]).ExecContext(ctx, args[:n*numColumns]...)
		if err != nil {
			return bad, err
		}
		if !s.postgres {
			last, _ = res.LastInsertId()
		}
		args = args[n*numColumns:]
	}
	if keepStates {
		if err := s.insertQuestions(ctx, tx, recs); err != nil {
			return bad, err
		}
	}
	if err := tx.Commit(); err != nil {
		return bad, err
	}
	s.lastID = last
	return bad, nil
}

// wrote reports whether the last insert wrote recs[i] (it was not left
// out).
func (s *store) wrote(i int) bool { return s.texts[i][0][0] >= 0 }

// insertStmt is the prepared INSERT of n rows.
func (s *store) insertStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	if st, ok := s.inserts[n]; ok {
		return st, nil
	}
	values := strings.TrimSuffix(strings.Repeat(rowPlaceholders+",", n), ",")
	insert := "INSERT INTO"
	if !s.postgres {
		// On SQLite an INSERT of several rows that can fail midway
		// (a NOT NULL column's ABORT) keeps a statement journal, to
		// undo its rows alone: the pages it changes, copied into a
		// temporary file past 64 KiB, about half of the writer's
		// pwrites at 512 records. A failed INSERT fails its batch's
		// transaction whole anyway (insert rolls it back), so ROLLBACK,
		// which needs no statement journal, ends it the same way.
		insert = "INSERT OR ROLLBACK INTO"
	}
	st, err := s.db.PrepareContext(ctx, s.q(insert+" decisions ("+columns+") VALUES "+values))
	if err != nil {
		return nil, err
	}
	if s.inserts == nil {
		s.inserts = map[int]*sql.Stmt{}
	}
	s.inserts[n] = st
	return st, nil
}

// encode makes the INSERT arguments of recs, numColumns a row, in s.args.
// The text columns the writer makes (the JSON of the options and of the
// distributions, the state's hash) are written into one reused buffer and
// made one string for the whole batch, of which each column is a part:
// one allocation for them all rather than several a record. A state is
// hashed once for the records of one request, which share it.
func (s *store) encode(recs []Record, keepStates bool) (args []any, bad int) {
	buf, at := s.buf[:0], s.texts[:0]
	var lastState []byte
	lastHash := [2]int{-1, -1}
	for i := range recs {
		r := &recs[i]
		start := len(buf)
		var t [5][2]int // the offsets in buf of opts, eng, steps, fin, hash
		var ok, fine bool
		t[0][0] = len(buf)
		buf = appendStrings(buf, r.Options)
		t[0][1], t[1][0] = len(buf), len(buf)
		buf, ok = appendFloats(buf, r.EngineDist)
		t[1][1], t[2][0] = len(buf), len(buf)
		buf, fine = appendSteps(buf, r.Steps)
		ok = ok && fine
		t[2][1], t[3][0] = len(buf), len(buf)
		buf, fine = appendFloats(buf, r.Answered())
		ok = ok && fine
		t[3][1] = len(buf)
		if s.postgres && (holdsNUL(r, keepStates) || len(r.RequestID)+len(r.QuestionID) > maxIndexedIDs) {
			ok = false
		}
		if !ok {
			buf = buf[:start]
			bad++
			at = append(at, [5][2]int{{-1, -1}})
			continue
		}
		switch {
		case r.StateHash != "":
		case lastHash[0] >= 0 && sameBytes(r.State, lastState):
			t[4] = lastHash
		default:
			h := sha256.Sum256(r.State)
			t[4][0] = len(buf)
			buf = hex.AppendEncode(buf, h[:])
			t[4][1] = len(buf)
			lastState, lastHash = r.State, t[4]
		}
		at = append(at, t)
	}
	text := string(buf)
	s.buf, s.texts = buf, at
	// A string column's value is boxed in an interface once for the
	// records in a row that share it (a request's id and state hash; the
	// face, model, node, kind, cascade and key), not once a record.
	var last [10]string
	var boxed [10]any
	box := func(col int, v string) any {
		if boxed[col] == nil || last[col] != v {
			last[col], boxed[col] = v, v
		}
		return boxed[col]
	}
	args = s.args[:0]
	for i := range recs {
		t := at[i]
		if t[0][0] < 0 {
			continue // not finite
		}
		r := &recs[i]
		hash := cmp.Or(r.StateHash, text[t[4][0]:t[4][1]])
		var mass, state, cost any
		if r.LabelMass != nil {
			mass = *r.LabelMass
		}
		if r.Cost != nil {
			cost = int64(*r.Cost)
		}
		if keepStates && r.State != nil {
			state = string(r.State)
		}
		args = append(args, box(0, r.RequestID), box(1, r.QuestionID), r.Time.UnixNano(), box(2, r.Face), box(3, r.Model),
			box(4, r.Node), box(5, string(r.Kind)), text[t[0][0]:t[0][1]], text[t[1][0]:t[1][1]], text[t[2][0]:t[2][1]],
			text[t[3][0]:t[3][1]], mass, r.Latency.Microseconds(), box(6, hash), state, box(7, r.Fingerprint), cost,
			box(8, r.Cascade), r.Stage, box(9, r.Key), int64(r.InputTokens), int64(r.OutputTokens))
	}
	s.args = args
	return args, bad
}

// maxIndexedIDs bounds a record's request and question ids together, in
// bytes, on PostgreSQL, whose indexes on them take an entry of at most
// 2,704 bytes: a longer pair would fail its whole batch (SQLSTATE 54000),
// so its record is left out, as one holding a NUL is.
const maxIndexedIDs = 2600

// holdsNUL reports whether a text column of r, as written, holds a NUL,
// which PostgreSQL's text cannot: a caller's id (decide's request_id, a
// question id) may. The JSON columns escape it.
func holdsNUL(r *Record, keepStates bool) bool {
	for _, v := range []string{r.RequestID, r.QuestionID, r.Face, r.Model, r.Node, string(r.Kind), r.StateHash, r.Fingerprint, r.Cascade, r.Key} {
		if strings.IndexByte(v, 0) >= 0 {
			return true
		}
	}
	return keepStates && bytes.IndexByte(r.State, 0) >= 0
}

// sameBytes reports whether a and b are the same bytes in memory: the
// state of one request, which its records share.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// appendStrings, appendFloats and appendSteps write what json.Marshal
// writes for a slice (nil as []), without its reflection: the writer
// encodes four of them per record. false means a number is not finite,
// which JSON cannot hold; what was written is then to be cut off.
func appendStrings(b []byte, ss []string) []byte {
	b, _ = appendArray(b, ss, func(b []byte, s string) ([]byte, bool) { return appendString(b, s), true })
	return b
}

func appendFloats(b []byte, fs []float64) ([]byte, bool) { return appendArray(b, fs, appendFloat) }

func appendSteps(b []byte, steps []Step) ([]byte, bool) {
	return appendArray(b, steps, func(b []byte, st Step) ([]byte, bool) {
		b = append(b, `{"name":`...)
		b = appendString(b, st.Name)
		b = append(b, `,"version":`...)
		b = appendString(b, st.Version)
		b = append(b, `,"dist":`...)
		if st.Dist == nil { // json.Marshal writes a nil slice field as null
			return append(b, "null}"...), true
		}
		b, ok := appendFloats(b, st.Dist)
		return append(b, '}'), ok
	})
}

// appendArray writes xs as a JSON array, each element by elem, until
// elem reports false.
func appendArray[T any](b []byte, xs []T, elem func([]byte, T) ([]byte, bool)) ([]byte, bool) {
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = elem(b, x); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

// appendString writes s quoted as json.Marshal does: text that needs no
// escape as it is, anything else through json.Marshal itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat writes f as json.Marshal does a float64.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 as e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// selectEntry reads a decisions row with its latest outcome and the
// number of outcomes.
const selectEntry = `SELECT d.id, ` + columns + `,
	(SELECT o.outcome FROM outcomes o WHERE o.request_id = d.request_id AND o.question_id = d.question_id ORDER BY o.id DESC LIMIT 1),
	(SELECT o.at_ns FROM outcomes o WHERE o.request_id = d.request_id AND o.question_id = d.question_id ORDER BY o.id DESC LIMIT 1),
	(SELECT COUNT(*) FROM outcomes o WHERE o.request_id = d.request_id AND o.question_id = d.question_id)
	FROM decisions d `

func (s *store) entries(ctx context.Context, where string, args ...any) ([]Entry, error) {
	var out []Entry
	err := s.each(ctx, selectEntry+where, args, func(rows *sql.Rows) error {
		var e Entry
		var outcome sql.NullString
		var outAt sql.NullInt64
		if err := scanEntry(rows, &e, &outcome, &outAt, &e.Outcomes); err != nil {
			return err
		}
		if outcome.Valid {
			e.Outcome = &Outcome{Value: outcome.String, Time: time.Unix(0, outAt.Int64).UTC()}
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// each runs query, written with ? parameters, and calls row with each
// row it returns, until row fails.
func (s *store) each(ctx context.Context, query string, args []any, row func(*sql.Rows) error) error {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scanEntry reads a row of the decisions table's id and columns, then
// into more the columns after them.
func scanEntry(rows *sql.Rows, e *Entry, more ...any) error {
	var kind, opts, eng, steps, fin string
	var atNS, latUS int64
	var mass sql.NullFloat64
	var state sql.NullString
	var cost sql.NullInt64
	var inTok, outTok int64
	dest := append([]any{&e.ID, &e.RequestID, &e.QuestionID, &atNS, &e.Face, &e.Model, &e.Node, &kind,
		&opts, &eng, &steps, &fin, &mass, &latUS, &e.StateHash, &state, &e.Fingerprint, &cost, &e.Cascade, &e.Stage, &e.Key, &inTok, &outTok}, more...)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	e.Time = time.Unix(0, atNS).UTC()
	e.Kind = decision.Kind(kind)
	e.Latency = time.Duration(latUS) * time.Microsecond
	e.InputTokens, e.OutputTokens = int(inTok), int(outTok)
	for _, f := range []struct {
		raw string
		to  any
	}{{opts, &e.Options}, {eng, &e.EngineDist}, {steps, &e.Steps}, {fin, &e.Final}} {
		if err := json.Unmarshal([]byte(f.raw), f.to); err != nil {
			return fmt.Errorf("row %d: %w", e.ID, err)
		}
	}
	if mass.Valid {
		m := mass.Float64
		e.LabelMass = &m
	}
	if state.Valid {
		e.State = json.RawMessage(state.String)
	}
	if cost.Valid {
		c := decision.USD(cost.Int64)
		e.Cost = &c
	}
	return nil
}

// selectLabelled reads each outcome with the decisions row it is for
// (every row of its request and question, as selectEntry attaches the
// latest outcome to each).
var selectLabelled = `SELECT d.id, d.` + strings.ReplaceAll(columns, ", ", ", d.") + `, o.id, o.outcome, o.at_ns
	FROM outcomes o JOIN decisions d ON d.request_id = o.request_id AND d.question_id = o.question_id
	WHERE o.id > ? AND o.id <= ? ORDER BY o.id, d.id`

// labelled reads the outcomes of ids in (after, upTo] with their rows.
func (s *store) labelled(ctx context.Context, after, upTo int64) ([]Labelled, error) {
	var out []Labelled
	err := s.each(ctx, selectLabelled, []any{after, upTo}, func(rows *sql.Rows) error {
		var l Labelled
		var value string
		var at int64
		if err := scanEntry(rows, &l.Entry, &l.OutcomeID, &value, &at); err != nil {
			return err
		}
		l.Outcome = &Outcome{Value: value, Time: time.Unix(0, at).UTC()}
		out = append(out, l)
		return nil
	})
	return out, err
}

// outcomeBound is the id of the n-th outcome after after, or the last
// one's when there are fewer; after itself when there is none.
func (s *store) outcomeBound(ctx context.Context, after int64, n int) (int64, error) {
	id, err := s.id(ctx, "SELECT MAX(id) FROM (SELECT id FROM outcomes WHERE id > ? ORDER BY id LIMIT ?) AS o", after, n)
	return cmp.Or(id, after), err
}

// id is the id query, written with ? parameters, selects, such as the
// last outcome's or the least decision kept: 0 when there is none.
func (s *store) id(ctx context.Context, query string, args ...any) (int64, error) {
	var id sql.NullInt64
	if err := s.db.QueryRowContext(ctx, s.q(query), args...).Scan(&id); err != nil {
		return 0, err
	}
	return id.Int64, nil
}

// outcomeLock is the PostgreSQL advisory lock the outcome writers of
// every process sharing the log take in turn (init's is 7315560401).
const outcomeLock = 7315560402

// outcomesPerInsert bounds the rows of one INSERT of outcomes, 4
// parameters each.
const outcomesPerInsert = 500

// addOutcomes inserts outcomes, in order, in one transaction.
func (s *store) addOutcomes(ctx context.Context, batch []Checked, at time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.postgres {
		// An outcome's id is drawn from a sequence as it is inserted,
		// before its transaction commits: a reader tailing by id
		// (OutcomesAfter) would pass over one whose transaction commits
		// after a later one's. Under the lock, ids are drawn and
		// committed one transaction at a time. (SQLite's one connection
		// orders them already.)
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", outcomeLock)); err != nil {
			return err
		}
	}
	for len(batch) > 0 {
		chunk := batch[:min(len(batch), outcomesPerInsert)]
		batch = batch[len(chunk):]
		values := strings.TrimSuffix(strings.Repeat("(?,?,?,?),", len(chunk)), ",")
		args := make([]any, 0, 4*len(chunk))
		for _, c := range chunk {
			args = append(args, c.Entry.RequestID, c.Entry.QuestionID, c.Outcome, at.UnixNano())
		}
		if _, err := tx.ExecContext(ctx, s.q("INSERT INTO outcomes (request_id, question_id, outcome, at_ns) VALUES "+values), args...); err != nil {
			return err
		}
	}
	return tx.Commit()
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
	res, err = s.db.ExecContext(ctx, s.q(
		"DELETE FROM decisions WHERE id <= (SELECT id FROM decisions ORDER BY id DESC LIMIT 1 OFFSET ?)"), maxRows)
	if err != nil {
		return n, err
	}
	m, _ := res.RowsAffected()
	return n + m, s.pruneQuestions(ctx, cutoff)
}

func (s *store) close() error {
	for _, st := range s.inserts {
		_ = st.Close()
	}
	return s.db.Close()
}
