package jobs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"system1/internal/decision"
)

// readAll reads every row of content, written to a file named name.
func readAll(t *testing.T, name, content string) []inputRow {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := format(path, "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := openRows(path, f, testJob(t).Questions, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []inputRow
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			return rows
		}
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
}

// want is what a test expects of one row: its line, id and state, or the
// start of its error, and its expected outcomes (nil: none given).
type want struct {
	line     int
	id       string
	state    string
	err      string
	expected []int
}

func checkRows(t *testing.T, got []inputRow, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		for _, r := range got {
			t.Logf("row %+v", r)
		}
		t.Fatalf("%d rows, want %d", len(got), len(wants))
	}
	for i, w := range wants {
		r := got[i]
		if r.Line != w.line || string(r.ID) != w.id {
			t.Errorf("row %d: line %d id %s, want line %d id %s", i, r.Line, r.ID, w.line, w.id)
		}
		if w.err != "" {
			if r.Err == nil || !strings.Contains(r.Err.Error(), w.err) {
				t.Errorf("row %d: error %v, want one containing %q", i, r.Err, w.err)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("row %d: %v", i, r.Err)
			continue
		}
		if string(r.State) != w.state {
			t.Errorf("row %d: state %s, want %s", i, r.State, w.state)
		}
		exp := w.expected
		if exp == nil {
			exp = []int{-1, -1}
		}
		if !slices.Equal(r.Expected, exp) {
			t.Errorf("row %d: expected %v, want %v", i, r.Expected, exp)
		}
	}
}

func TestJSONLReader(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		rows          []want
	}{
		{"ids as given", "{\"id\":\"a\",\"state\":\"s\"}\n{\"id\": 7, \"state\": [1]}\n{\"id\":1.50,\"state\":{}}\n", []want{
			{line: 1, id: `"a"`, state: `"s"`},
			{line: 2, id: `7`, state: `[1]`},
			{line: 3, id: `1.50`, state: `{}`},
		}},
		{"BOM, CRLF, blank lines, no final newline", "\xef\xbb\xbf{\"id\":\"a\",\"state\":\"s\"}\r\n\r\n   \n{\"id\":\"b\",\"state\":\"t\"}", []want{
			{line: 1, id: `"a"`, state: `"s"`},
			{line: 4, id: `"b"`, state: `"t"`},
		}},
		{"malformed lines are error rows naming the line", "{\"id\":\"a\",\"state\":\"s\"}\n{\"id\":\"b\",\"state\":\n[1,2]\n{\"id\":\"c\",\"id\":\"d\",\"state\":\"s\"}\n{\"id\":true,\"state\":\"s\"}\n{\"state\":\"s\"}\n{\"id\":\"e\"}\n{\"id\":\"f\",\"state\":12}\n{\"id\":\"g\",\"state\":\"s\"}\n{\"id\":\"h\",\"state\":{\"a\":1,\"a\":2}}\n", []want{
			{line: 1, id: `"a"`, state: `"s"`},
			{line: 2, err: "line 2 is not valid JSON"},
			{line: 3, err: "line 3: a row must be a JSON object"},
			{line: 4, err: `line 4: the key "id" appears twice`},
			{line: 5, err: "line 5: id: a string or a number is required, got boolean"},
			{line: 6, err: "line 6: id: required"},
			{line: 7, id: `"e"`, err: "line 7: state: required"},
			{line: 8, id: `"f"`, err: "line 8: state: state must be a string, an object or an array"},
			{line: 9, id: `"g"`, state: `"s"`},
			{line: 10, id: `"h"`, err: `line 10: state.a: the key "a" appears twice`},
		}},
		{"an empty id is an error row, as an empty CSV id is", "{\"id\":\"\",\"state\":\"s\"}\n{\"id\":\"b\",\"state\":\"s\"}\n", []want{
			{line: 1, err: "line 1: id: empty"},
			{line: 2, id: `"b"`, state: `"s"`},
		}},
		{"invalid UTF-8", "{\"id\":\"a\",\"state\":\"\xff\"}\n{\"id\":\"\xfe\",\"state\":\"s\"}\n{\"id\":\"b\",\"state\":\"\\ud800\"}\n", []want{
			{line: 1, id: `"a"`, err: "not valid UTF-8"},
			{line: 2, err: "id: not valid UTF-8"},
			{line: 3, id: `"b"`, err: "not valid UTF-8"},
		}},
		{"expected outcomes, as bench's case files give them", `{"id":1,"state":"s","expected":{"urgent":true,"dept":"tech"}}
{"id":2,"state":"s","expected":{"urgent":false}}
{"id":3,"state":"s","expected":{"dept":null}}
{"id":4,"state":"s","expected":{"dept":"hr"}}
{"id":5,"state":"s","expected":{"nope":"x"}}
{"id":6,"state":"s","expected":{"urgent":"yes"}}
{"id":7,"state":"s","expected":[1]}
`, []want{
			{line: 1, id: `1`, state: `"s"`, expected: []int{0, 1}},
			{line: 2, id: `2`, state: `"s"`, expected: []int{1, -1}},
			{line: 3, id: `3`, state: `"s"`},
			{line: 4, id: `4`, err: `expected.dept: "hr" is not one of the options "billing", "tech", "sales"`},
			{line: 5, id: `5`, err: `expected.nope: the job has no question "nope"`},
			{line: 6, id: `6`, err: `expected.urgent: "yes" is not true or false`},
			{line: 7, id: `7`, err: "expected: an object"},
		}},
		{"a line over the limit", `{"id":"a","state":"` + strings.Repeat("x", MaxLineBytes) + "\"}\n{\"id\":\"b\",\"state\":\"s\"}\n", []want{
			{line: 1, err: "line 1 is longer than"},
			{line: 2, id: `"b"`, state: `"s"`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRows(t, readAll(t, "in.jsonl", tc.content), tc.rows)
		})
	}
}

func TestCSVReader(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		rows          []want
	}{
		{"columns in order, id anywhere", "text,id,lang\nhello,a,en\n", []want{
			{line: 2, id: `"a"`, state: `{"text":"hello","lang":"en"}`},
		}},
		{"odd quoting", "id,text\n\"a\",\"say \"\"hi\"\", then, go\"\nb,\"two\nlines\"\n\"c\",\"\"\nd,<&>\n", []want{
			{line: 2, id: `"a"`, state: `{"text":"say \"hi\", then, go"}`},
			{line: 3, id: `"b"`, state: `{"text":"two\nlines"}`},
			{line: 5, id: `"c"`, state: `{"text":""}`},
			{line: 6, id: `"d"`, state: `{"text":"<&>"}`},
		}},
		{"BOM, CRLF and empty lines", "\xef\xbb\xbfid,text\r\n\r\na,x\r\n\r\nb,y\r\n", []want{
			{line: 3, id: `"a"`, state: `{"text":"x"}`},
			{line: 5, id: `"b"`, state: `{"text":"y"}`},
		}},
		{"malformed rows are error rows", "id,text\na,x\nb,x,extra\nc\nd,bad\"quote\n,x\ne,\"\xff\"\nf,y\n", []want{
			{line: 2, id: `"a"`, state: `{"text":"x"}`},
			{line: 3, id: `"b"`, err: "line 3: 3 fields, the header has 2"},
			{line: 4, id: `"c"`, err: "line 4: 1 fields, the header has 2"},
			{line: 5, err: "line 5: bare \" in non-quoted-field"},
			{line: 6, err: "line 6: id: empty"},
			{line: 7, id: `"e"`, err: "line 7: column \"text\" is not valid UTF-8"},
			{line: 8, id: `"f"`, state: `{"text":"y"}`},
		}},
		// A stray quote opens a field that runs on into the next lines: the
		// row it starts on is an error row naming its line, and the lines
		// after it are read as rows again, so that every line is a row.
		{"a quote never closed", "id,text\na,x\nb,\"x\nc,y\nd,z\n", []want{
			{line: 2, id: `"a"`, state: `{"text":"x"}`},
			{line: 3, err: "line 3: a quoted field opened on this line is not closed"},
			{line: 4, id: `"c"`, state: `{"text":"y"}`},
			{line: 5, id: `"d"`, state: `{"text":"z"}`},
		}},
		{"a stray quote before a quoted field", "id,text\na,x\nb,\"x\nc,\"y, z\"\nd,z\n", []want{
			{line: 2, id: `"a"`, state: `{"text":"x"}`},
			{line: 3, err: "line 3:"},
			{line: 4, id: `"c"`, state: `{"text":"y, z"}`},
			{line: 5, id: `"d"`, state: `{"text":"z"}`},
		}},
		{"a stray quote closed on a later line, fields too many", "id,text\nb,\"x\nc\",y\nd,z\n", []want{
			{line: 2, err: "line 2:"},
			{line: 3, err: "line 3: bare \" in non-quoted-field"},
			{line: 4, id: `"d"`, state: `{"text":"z"}`},
		}},
		{"a line over the limit", "id,text\na,\"" + strings.Repeat("x", MaxLineBytes) + "\"\nb,y\n", []want{
			{line: 2, err: "line 2 is longer than"},
			{line: 3, id: `"b"`, state: `{"text":"y"}`},
		}},
		{"a quoted field over the line limit", "id,text\na,\"" + strings.Repeat("x", MaxLineBytes/2) + "\n," + strings.Repeat("x", MaxLineBytes/2) + "\n,x\"\nb,y\n", []want{
			{line: 2, err: "line 2: a quoted field opened on this line is not closed"},
			{line: 3, err: "line 3: id: empty"},
			{line: 4, err: "line 4: bare \" in non-quoted-field"},
			{line: 5, id: `"b"`, state: `{"text":"y"}`},
		}},
		{"expected columns", "id,text,expected.dept,expected.urgent\na,x,tech,true\nb,y,,false\nc,z,hr,\nd,w,,yes\n", []want{
			{line: 2, id: `"a"`, state: `{"text":"x"}`, expected: []int{0, 1}},
			{line: 3, id: `"b"`, state: `{"text":"y"}`, expected: []int{1, -1}},
			{line: 4, id: `"c"`, err: `line 4: expected.dept: "hr" is not one of the options`},
			{line: 5, id: `"d"`, err: `line 5: expected.urgent: "yes" is not true or false`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRows(t, readAll(t, "in.csv", tc.content), tc.rows)
		})
	}
}

// A header the rows cannot be read by refuses the input before any row.
func TestCSVHeaderRefused(t *testing.T) {
	for _, tc := range []struct{ content, err string }{
		{"", "no header"},
		{"text,lang\nx,y\n", "no id column"},
		{"id,text,text\n", `names the column "text" twice`},
		{"id,expected.nope\n", `"expected.nope" names no question`},
		// Lines ended by a CR alone (an old Mac export) read as one line:
		// a header and no rows, which ran as an empty input.
		{"id,text\ra,x\rb,y\r", "carriage return"},
	} {
		path := filepath.Join(t.TempDir(), "in.csv")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := openRows(path, "csv", testJob(t).Questions, false, nil)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %v, want %q", tc.content, err, tc.err)
		}
	}
}

func TestScanRefusesDuplicateIDs(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		rows          int
		err           string
	}{
		{"unique.jsonl", "{\"id\":\"a\",\"state\":\"s\"}\n{\"id\":1,\"state\":\"s\"}\n{\"id\":\"1\",\"state\":\"s\"}\nnot json\nnot json\n", 5, ""},
		{"dup.jsonl", "{\"id\":\"a\",\"state\":\"s\"}\n\n{\"id\":\"b\",\"state\":\"s\"}\n{\"id\":\"a\",\"state\":\"t\"}\n", 0, `the id "a" of line 4 is also the id of line 1`},
		{"escaped.jsonl", "{\"id\":\"a\",\"state\":\"s\"}\n{\"id\":\"\\u0061\",\"state\":\"s\"}\n", 0, `of line 2 is also the id of line 1`},
		{"dup.csv", "id,text\na,x\nb,y\na,z\n", 0, `the id "a" of line 4 is also the id of line 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			f, _ := format(path, "")
			n, err := scanInput(t.Context(), path, f, testJob(t).Questions, nil)
			switch {
			case tc.err == "" && (err != nil || n != tc.rows):
				t.Fatalf("%d rows, %v; want %d", n, err, tc.rows)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("%v, want %q", err, tc.err)
			}
		})
	}
}

// A CSV cell holds what a case file's expected value would, or a choice's
// key as plain text.
func TestExpectedCell(t *testing.T) {
	job, err := ParseQuestions([]byte(`{"mood":{"type":"score","criteria":["calm","cross","furious"]},"dept":{"type":"choice","criteria":{"true":"x","b":"y"}}}`), "m", decision.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	mood, dept := job.Questions[0], job.Questions[1]
	for _, tc := range []struct {
		q    decision.Question
		cell string
		want int
		err  string
	}{
		{mood, "2", 2, ""},
		{mood, "", -1, ""},
		{mood, "3", 0, "level 3 is not among the 3 levels"},
		{mood, "1.5", 0, "is not a level"},
		{mood, "calm", 0, "is not a level"},
		{dept, "true", 0, ""}, // a choice's key, though it reads as JSON
		{dept, "b", 1, ""},
	} {
		got, err := expectedCell(tc.q, tc.cell)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %q: %v, want %q", tc.q.ID, tc.cell, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %q: %d, %v; want %d", tc.q.ID, tc.cell, got, err, tc.want)
		}
	}
}

// An outcome column (--outcome question=COLUMN) is read as an
// expected.<question> column is, and never put in the state; in JSON
// Lines it is a key of the row.
func TestOutcomeColumns(t *testing.T) {
	job := testJob(t)
	cols, err := outcomeColumns(job, map[string]string{"dept": "label"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, content string
		rows          []want
	}{
		{"in.csv", "id,text,label\na,x,tech\nb,y,\nc,z,hr\n", []want{
			{line: 2, id: `"a"`, state: `{"text":"x"}`, expected: []int{-1, 1}},
			{line: 3, id: `"b"`, state: `{"text":"y"}`},
			{line: 4, id: `"c"`, err: `line 4: label (the outcome of dept): "hr" is not one of the options`},
		}},
		{"in.jsonl", `{"id":"a","state":"x","label":"tech"}` + "\n" + `{"id":"b","state":"y"}` + "\n" + `{"id":"c","state":"z","label":"hr"}` + "\n", []want{
			{line: 1, id: `"a"`, state: `"x"`, expected: []int{-1, 1}},
			{line: 2, id: `"b"`, state: `"y"`},
			{line: 3, id: `"c"`, err: `line 3: label (the outcome of dept): "hr" is not one of the options`},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.name)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			f, _ := format(path, "")
			r, err := openRows(path, f, job.Questions, false, cols)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got []inputRow
			for {
				row, err := r.Next()
				if err != nil {
					break
				}
				got = append(got, row)
			}
			checkRows(t, got, tc.rows)
		})
	}
	for _, bad := range []map[string]string{{"nope": "label"}, {"dept": "id"}, {"dept": "state"}, {"dept": "expected.urgent"}, {"dept": "x", "urgent": "x"}} {
		if _, err := outcomeColumns(job, bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	path := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte("id,text\na,x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openRows(path, "csv", job.Questions, false, cols); err == nil || !strings.Contains(err.Error(), `no column "label"`) {
		t.Errorf("a CSV without the outcome's column: %v", err)
	}
	// Two columns giving one question's outcome: which one the run read
	// was the later column's, silently.
	if err := os.WriteFile(path, []byte("id,text,expected.dept,label\na,x,tech,sales\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openRows(path, "csv", job.Questions, false, cols); err == nil || !strings.Contains(err.Error(), "the outcome of dept twice, in the columns expected.dept and label (the outcome of dept)") {
		t.Errorf("a CSV giving dept's outcome in two columns: %v", err)
	}
}
