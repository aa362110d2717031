package jobs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"system1/internal/cases"
	"system1/internal/decision"
	"system1/internal/jsonx"
	"system1/internal/systemone"
)

// MaxLineBytes bounds one JSONL input line: a longer one is an error row,
// never a line read whole into memory.
const MaxLineBytes = 16 << 20

// ExpectedPrefix begins a CSV column holding a question's expected
// outcome: expected.<question id>.
const ExpectedPrefix = "expected."

// inputRow is one row of the input.
type inputRow struct {
	// Line is the input line the row starts on, from 1.
	Line int
	// ID is the row's id as given: a JSON string or number, nil when the
	// row has none that can be read.
	ID json.RawMessage
	// State is what the job's questions are asked about.
	State json.RawMessage
	// Expected holds, aligned with the job's questions, the index of the
	// option the row says is right (for a noul 0 is true, 1 false), or -1
	// where it says nothing.
	Expected []int
	// Err says why the row cannot be asked: it is written as the row's
	// error row.
	Err error
}

// rowReader yields an input's rows in order.
type rowReader interface {
	// Next returns the next row, or io.EOF after the last; any other
	// error is the input's (it could not be read), not a row's.
	Next() (inputRow, error)
	Close() error
}

// CheckFormat reports whether asked is an input format a job reads.
func CheckFormat(asked string) error {
	if asked != "jsonl" && asked != "csv" {
		return fmt.Errorf("format %q: jsonl or csv", asked)
	}
	return nil
}

// format returns the input format: the one asked for, else "csv" for a
// .csv name and "jsonl" for any other.
func format(path, asked string) (string, error) {
	if asked != "" {
		return asked, CheckFormat(asked)
	}
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		return "csv", nil
	}
	return "jsonl", nil
}

// openRows opens the input at path. ids, when true, reads only what the
// scan for duplicate ids needs: no state is checked or kept. outcomes
// names the CSV columns (JSONL: the rows' keys) that hold a question's
// outcome, by the question's index; they are never part of the state.
func openRows(path, fmtName string, qs []decision.Question, ids bool, outcomes map[string]int) (rowReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var off int64
	if b, err := br.Peek(len(utf8BOM)); err == nil && bytes.Equal(b, utf8BOM) {
		n, _ := br.Discard(len(utf8BOM))
		off = int64(n)
	}
	lr := lineReader{f: f, br: br, off: off}
	if fmtName == "csv" {
		r, err := newCSVReader(lr, qs, ids, outcomes)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return r, nil
	}
	return &jsonlReader{lineReader: lr, qs: qs, ids: ids, outcomes: outcomes}, nil
}

// jsonlReader reads rows of JSON Lines: {"id", "state", "expected"}.
type jsonlReader struct {
	lineReader
	qs       []decision.Question
	ids      bool
	outcomes map[string]int
}

func (r *jsonlReader) Next() (inputRow, error) {
	for {
		text, n, tooLong, err := r.readLine()
		if err != nil {
			return inputRow{}, err
		}
		if tooLong || n > MaxLineBytes { // a JSONL line's bound counts its ending
			return inputRow{Line: r.line, Err: fmt.Errorf("line %d is longer than %d bytes", r.line, MaxLineBytes)}, nil
		}
		if len(bytes.TrimSpace(text)) == 0 {
			continue // an empty line is no row
		}
		return parseJSONRow(text, r.line, r.qs, r.ids, r.outcomes), nil
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// parseJSONRow reads one JSONL line. Whatever is wrong with it is the
// row's Err, naming the line; the id is kept whenever it can be read, so
// that the error row carries it.
func parseJSONRow(text []byte, line int, qs []decision.Question, ids bool, outcomes map[string]int) inputRow {
	row := inputRow{Line: line}
	fail := func(format string, a ...any) inputRow {
		row.Err = fmt.Errorf(format, a...)
		return row
	}
	if !json.Valid(text) {
		var v json.RawMessage
		err := json.Unmarshal(text, &v)
		return fail("line %d is not valid JSON: %v", line, err)
	}
	ms, err := jsonx.Members(text)
	var dup *jsonx.DuplicateKeyError
	switch {
	case jsonx.IsDuplicate(err, &dup):
		return fail("line %d: the key %q appears twice", line, dup.Key)
	case err != nil:
		return fail("line %d: a row must be a JSON object {\"id\", \"state\"}", line)
	}
	id, ok := jsonx.Lookup(ms, "id")
	switch k := jsonx.Kind(id); {
	case !ok:
		return fail("line %d: id: required", line)
	case k != "string" && k != "number":
		return fail("line %d: id: a string or a number is required, got %s", line, k)
	case k == "string" && !jsonx.TextOK(id):
		return fail("line %d: id: not valid UTF-8", line)
	case string(id) == `""`:
		return fail("line %d: id: empty", line)
	}
	row.ID = bytes.Clone(id)
	if ids {
		return row
	}
	state, ok := jsonx.Lookup(ms, "state")
	if !ok {
		return fail("line %d: state: required", line)
	}
	if row.State, err = checkState(state); err != nil {
		return fail("line %d: %v", line, err)
	}
	row.Expected = slices.Repeat([]int{-1}, len(qs))
	if exp, ok := jsonx.Lookup(ms, "expected"); ok && jsonx.Kind(exp) != "null" {
		if err := readExpected(exp, qs, row.Expected); err != nil {
			return fail("line %d: %v", line, err)
		}
	}
	for key, q := range outcomes {
		v, ok := jsonx.Lookup(ms, key)
		if !ok {
			continue // this row's outcome is not known
		}
		if row.Expected[q], err = expectedIndex(qs[q], v); err != nil {
			return fail("line %d: %s (the outcome of %s): %v", line, key, qs[q].ID, err)
		}
	}
	return row
}

// checkState applies the wire's rules for a state (a string, an object or
// an array, as valid UTF-8) through its own parser, so that they have one
// home, and returns the state as that parser keeps it: a copy that
// outlives the line.
func checkState(state json.RawMessage) (json.RawMessage, error) {
	body := make([]byte, 0, len(state)+10)
	body = append(body, `{"state":`...)
	body = append(body, state...)
	body = append(body, '}')
	p := systemone.ParseRequest(body)
	for _, pr := range p.Problems {
		switch {
		case len(pr.Path) == 0:
			return nil, fmt.Errorf("state: %s", pr.Msg)
		case pr.Path[0] == "state":
			return nil, fmt.Errorf("%s: %s", strings.Join(pr.Path, "."), pr.Msg)
		}
	}
	return p.State, nil
}

// readExpected reads a row's {"<question id>": outcome} into out.
func readExpected(raw json.RawMessage, qs []decision.Question, out []int) error {
	ms, err := jsonx.Members(raw)
	if err != nil {
		return errors.New("expected: an object of question id -> outcome is required")
	}
	for _, m := range ms {
		i := questionIndex(qs, m.Key)
		if i < 0 {
			return fmt.Errorf("expected.%s: the job has no question %q", m.Key, m.Key)
		}
		if out[i], err = expectedIndex(qs[i], m.Value); err != nil {
			return fmt.Errorf("expected.%s: %v", m.Key, err)
		}
	}
	return nil
}

func questionIndex(qs []decision.Question, id string) int {
	return slices.IndexFunc(qs, func(q decision.Question) bool { return q.ID == id })
}

// expectedIndex reads one expected outcome of q as bench's case files
// give it (see cases.ExpectedIndex); null is none (-1).
func expectedIndex(q decision.Question, raw json.RawMessage) (int, error) {
	if jsonx.Kind(raw) == "null" {
		return -1, nil
	}
	return cases.ExpectedIndex(q, raw)
}

// expectedCell reads an expected outcome from a CSV cell, whose text is
// the JSON value a case file would hold (true, 2) or, for a choice, the
// key itself; an empty cell is none (-1).
func expectedCell(q decision.Question, cell string) (int, error) {
	if cell == "" {
		return -1, nil
	}
	raw, _ := json.Marshal(cell)
	if q.Kind != decision.Choice && json.Valid([]byte(cell)) {
		raw = []byte(cell)
	}
	return expectedIndex(q, raw)
}

// csvReader reads rows of CSV: a header with an id column; each other
// column is a key of the state, a JSON object of strings in column order,
// except expected.<question id> columns, which hold outcomes.
type csvReader struct {
	recs  *csvRecords
	qs    []decision.Question
	ids   bool
	width int
	idCol int
	state []csvColumn
	exp   []csvColumn // question is the question's index
}

type csvColumn struct {
	col      int
	key      []byte // the state's key, JSON-encoded, with its colon
	question int
	name     string // an outcome's column as its errors name it
}

// newCSVReader reads the header of the CSV that lr reads.
func newCSVReader(lr lineReader, qs []decision.Question, ids bool, outcomes map[string]int) (*csvReader, error) {
	recs := &csvRecords{lineReader: lr}
	rec, err := recs.next(0)
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the CSV has no header (it needs an id column)")
	}
	if err == nil {
		err = rec.Err
	}
	header := rec.Fields
	if err != nil {
		return nil, fmt.Errorf("the CSV header: %w", err)
	}
	r := &csvReader{recs: recs, qs: qs, ids: ids, width: len(header), idCol: -1}
	seen := map[string]bool{}
	for i, name := range header {
		// Lines join CRLF and LF alike, so a CR left in a header name is
		// one alone: lines ended that way would read as one header line.
		if strings.ContainsRune(name, '\r') {
			return nil, fmt.Errorf("the CSV column %d's name holds a carriage return: the file's lines end in a CR alone (an old Mac format); save it with LF or CRLF line endings", i+1)
		}
		if seen[name] {
			return nil, fmt.Errorf("the CSV header names the column %q twice", name)
		}
		seen[name] = true
		q, outcome := outcomes[name]
		switch {
		case name == "id":
			r.idCol = i
		case outcome:
			r.exp = append(r.exp, csvColumn{col: i, question: q, name: fmt.Sprintf("%s (the outcome of %s)", name, qs[q].ID)})
		case strings.HasPrefix(name, ExpectedPrefix):
			qid := strings.TrimPrefix(name, ExpectedPrefix)
			q := questionIndex(qs, qid)
			if q < 0 && !ids {
				return nil, fmt.Errorf("the CSV column %q names no question of the job", name)
			}
			r.exp = append(r.exp, csvColumn{col: i, question: q, name: name})
		default:
			if !utf8.ValidString(name) {
				return nil, fmt.Errorf("the CSV column %d's name is not valid UTF-8", i+1)
			}
			// The key and each cell are written as they are (jsonx.AppendString),
			// so that the model reads the state a JSONL row gives it.
			r.state = append(r.state, csvColumn{col: i, key: append(jsonx.AppendString(nil, name), ':')})
		}
	}
	outcomeOf := map[int]string{} // the column giving each question's outcome
	for _, c := range r.exp {
		if c.question < 0 {
			continue
		}
		if other, ok := outcomeOf[c.question]; ok {
			return nil, fmt.Errorf("the CSV gives the outcome of %s twice, in the columns %s and %s: keep one", qs[c.question].ID, other, c.name)
		}
		outcomeOf[c.question] = c.name
	}
	if r.idCol < 0 {
		return nil, errors.New("the CSV header has no id column")
	}
	for name, q := range outcomes {
		if !seen[name] {
			return nil, fmt.Errorf("the CSV has no column %q for the outcome of %s", name, qs[q].ID)
		}
	}
	return r, nil
}

func (r *csvReader) Close() error { return r.recs.Close() }

func (r *csvReader) Next() (inputRow, error) {
	record, err := r.recs.next(r.width)
	if err != nil {
		return inputRow{}, err
	}
	line, rec := record.Line, record.Fields
	row := inputRow{Line: line}
	if record.Err != nil {
		// The id, where the record's fields could be read (a row of the
		// wrong width), so that its error row carries it.
		row.Err = record.Err
		if r.idCol < len(rec) && rec[r.idCol] != "" && utf8.ValidString(rec[r.idCol]) {
			row.ID, _ = json.Marshal(rec[r.idCol])
		}
		return row, nil
	}
	id := rec[r.idCol]
	switch {
	case id == "":
		row.Err = fmt.Errorf("line %d: id: empty", line)
		return row, nil
	case !utf8.ValidString(id):
		row.Err = fmt.Errorf("line %d: id: not valid UTF-8", line)
		return row, nil
	}
	row.ID, _ = json.Marshal(id)
	if r.ids {
		return row, nil
	}
	n := 2
	for _, c := range r.state {
		n += len(c.key) + len(rec[c.col]) + 3
	}
	state := make([]byte, 0, n)
	state = append(state, '{')
	for i, c := range r.state {
		cell := rec[c.col]
		if !utf8.ValidString(cell) {
			row.Err = fmt.Errorf("line %d: column %s is not valid UTF-8", line, c.key[:len(c.key)-1])
			return row, nil
		}
		if i > 0 {
			state = append(state, ',')
		}
		state = append(state, c.key...)
		state = jsonx.AppendString(state, cell)
	}
	row.State = append(state, '}')
	row.Expected = slices.Repeat([]int{-1}, len(r.qs))
	for _, c := range r.exp {
		k, err := expectedCell(r.qs[c.question], rec[c.col])
		if err != nil {
			row.Err = fmt.Errorf("line %d: %s: %v", line, c.name, err)
			return row, nil
		}
		row.Expected[c.question] = k
	}
	return row, nil
}

// scanInput reads the whole input once, keeping only ids: it counts the
// rows and refuses an id given twice, naming both lines, before any row is
// asked. Strings are compared as text, so "a" and "\u0061" are one id.
func scanInput(ctx context.Context, path, fmtName string, qs []decision.Question, outcomes map[string]int) (int, error) {
	r, err := openRows(path, fmtName, qs, true, outcomes)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	seen := map[string]int{}
	n := 0
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", path, err)
		}
		n++
		if n%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if row.ID == nil {
			continue
		}
		key := idKey(row.ID)
		if first, dup := seen[key]; dup {
			return 0, fmt.Errorf("%s: the id %s of line %d is also the id of line %d; ids must be unique", path, row.ID, row.Line, first)
		}
		seen[key] = row.Line
	}
}

// idKey is an id as compared for duplicates: a string's text, a number's
// digits.
func idKey(id json.RawMessage) string {
	if id[0] != '"' {
		return "n" + string(id)
	}
	var s string
	if bytes.IndexByte(id, '\\') < 0 || json.Unmarshal(id, &s) != nil {
		s = string(id[1 : len(id)-1])
	}
	return "s" + s
}
