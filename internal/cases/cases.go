// Package cases reads labelled case files: JSON Lines whose every line is a
// System One request body (state and questions) with an id, the set it
// belongs to and the expected answer to each question, the format of
// ../shared/data (see its README):
//
//	{"id": "...", "set": "...", "state": <string or object>,
//	 "questions": {"<qid>": {"type": "choice|noul|score", "instructions": "...", "criteria": ...}},
//	 "expected":  {"<qid>": <choice key | true/false | level index>}}
//
// The request part is read by systemone.ParseRequest, so question and
// criteria order and every structural check are the wire's own. A line
// that cannot be used is an error naming its file and line; none is
// skipped silently.
package cases

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/jsonx"
	"system1/internal/systemone"
)

// MaxLineBytes bounds one line of a case file: a state of the wire's
// 256 KiB limit, escaped, and its questions fit with room to spare.
const MaxLineBytes = 4 << 20

// Case is one labelled request.
type Case struct {
	ID string
	// Set names the case set; a line without one takes its file's name
	// without the extension.
	Set string
	// Request is the request to ask, without a model: the caller sets
	// it.
	Request decision.Request
	// Expected is, aligned with Request.Questions, the index of the right
	// option: the choice key's position among the criteria, 0 for a noul
	// whose answer is true and 1 for false, the level of a score.
	Expected []int
	// File and Line locate the case, for messages.
	File string
	Line int
}

// Where is the case's file:line.
func (c Case) Where() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

// Limits are what a case may ask: the wire's default limits except that a
// choice may carry up to config.MaxOptions options, as hosted Jev takes;
// whether an endpoint takes that many is for the endpoint to say.
func Limits() decision.Limits {
	lim := decision.DefaultLimits()
	lim.MaxChoiceOptions = config.MaxOptions
	return lim
}

// ParseLine reads one line of a case file. set is the set a line without
// a "set" field belongs to. The error says what is wrong, without the
// file and line, which the caller adds.
func ParseLine(line []byte, set string) (Case, error) {
	// encoding/json would turn invalid UTF-8 into U+FFFD: an id, a key
	// or a state other than the file's.
	if !utf8.Valid(line) {
		return Case{}, errors.New("not valid UTF-8")
	}
	if !json.Valid(line) {
		return Case{}, errors.New("not valid JSON")
	}
	ms, err := jsonx.Members(line)
	if err != nil {
		return Case{}, fmt.Errorf("a case must be a JSON object: %v", err)
	}
	var top struct{ ID, Set, Expected json.RawMessage }
	top.ID, _ = jsonx.Lookup(ms, "id")
	top.Set, _ = jsonx.Lookup(ms, "set")
	top.Expected, _ = jsonx.Lookup(ms, "expected")
	c := Case{Set: set}
	if len(top.ID) == 0 || jsonx.Kind(top.ID) != "string" {
		return Case{}, errors.New(`"id" must be a non-empty string`)
	}
	_ = json.Unmarshal(top.ID, &c.ID)
	if c.ID == "" {
		return Case{}, errors.New(`"id" must be a non-empty string`)
	}
	// A lone surrogate escape decodes to U+FFFD too.
	if strings.ContainsRune(c.ID, utf8.RuneError) && !bytes.ContainsRune(top.ID, utf8.RuneError) && !bytes.Contains(bytes.ToLower(top.ID), []byte(`\ufffd`)) {
		return Case{}, errors.New(`"id" holds a lone surrogate escape (\ud800 to \udfff unpaired)`)
	}
	if len(top.Set) > 0 && jsonx.Kind(top.Set) != "null" {
		if jsonx.Kind(top.Set) != "string" {
			return Case{}, fmt.Errorf("case %s: \"set\" must be a string", c.ID)
		}
		_ = json.Unmarshal(top.Set, &c.Set)
		if c.Set == "" {
			return Case{}, fmt.Errorf("case %s: \"set\" must not be empty", c.ID)
		}
	}

	p := systemone.ParseRequest(line)
	var problems []string
	for _, pr := range p.Validate(Limits()) {
		if len(pr.Path) > 0 && pr.Path[0] == "model" {
			continue // the model is the bench's to choose
		}
		problems = append(problems, describe(pr))
	}
	if len(problems) > 0 {
		return Case{}, fmt.Errorf("case %s: %s", c.ID, strings.Join(problems, "; "))
	}
	c.Request = p.Request
	c.Request.Model = ""

	if len(top.Expected) == 0 || jsonx.Kind(top.Expected) == "null" {
		return Case{}, fmt.Errorf("case %s: \"expected\" is required: an object of question id -> expected answer", c.ID)
	}
	expected, err := jsonx.Members(top.Expected)
	if err != nil {
		return Case{}, fmt.Errorf("case %s: \"expected\" must be an object of question id -> expected answer: %v", c.ID, err)
	}
	asked := map[string]int{}
	for i, q := range c.Request.Questions {
		asked[q.ID] = i
	}
	c.Expected = make([]int, len(c.Request.Questions))
	got := make([]bool, len(c.Request.Questions))
	for _, m := range expected {
		i, ok := asked[m.Key]
		if !ok {
			return Case{}, fmt.Errorf("case %s: expected.%s: no question has this id", c.ID, m.Key)
		}
		idx, err := ExpectedIndex(c.Request.Questions[i], m.Value)
		if err != nil {
			return Case{}, fmt.Errorf("case %s: expected.%s: %v", c.ID, m.Key, err)
		}
		c.Expected[i], got[i] = idx, true
	}
	for i, q := range c.Request.Questions {
		if !got[i] {
			return Case{}, fmt.Errorf("case %s: expected.%s: missing; every question needs its expected answer", c.ID, q.ID)
		}
	}
	return c, nil
}

// describe writes a request problem as path: message.
func describe(p decision.Problem) string {
	if len(p.Path) == 0 {
		return p.Msg
	}
	return strings.Join(p.Path, ".") + ": " + p.Msg
}

// ExpectedIndex maps an expected answer to q's option index: a choice's
// criteria key (a JSON string), a noul's true or false (0 and 1), a
// score's level index (a JSON integer).
func ExpectedIndex(q decision.Question, raw json.RawMessage) (int, error) {
	switch q.Kind {
	case decision.Choice:
		var key string
		if jsonx.Kind(raw) != "string" || json.Unmarshal(raw, &key) != nil {
			return 0, fmt.Errorf("%s is not a choice key: a choice's expected answer is one of its criteria keys, as a string", short(raw))
		}
		if i := q.OptionIndex(key); i >= 0 {
			return i, nil
		}
		keys := make([]string, len(q.Options))
		for i, o := range q.Options {
			keys[i] = strconv.Quote(o.Key)
		}
		return 0, fmt.Errorf("%q is not one of the options %s", key, strings.Join(keys, ", "))
	case decision.Noul:
		switch string(bytes.TrimSpace(raw)) {
		case "true":
			return 0, nil
		case "false":
			return 1, nil
		}
		return 0, fmt.Errorf("%s is not true or false: a noul's expected answer is a JSON boolean", short(raw))
	case decision.Score:
		var f float64
		if jsonx.Kind(raw) != "number" || json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) {
			return 0, fmt.Errorf("%s is not a level: a score's expected answer is a level index, an integer", short(raw))
		}
		if f < 0 || f >= float64(len(q.Options)) {
			return 0, fmt.Errorf("level %v is not among the %d levels 0..%d", f, len(q.Options), len(q.Options)-1)
		}
		return int(f), nil
	}
	return 0, fmt.Errorf("unknown question type %q", q.Kind)
}

// short is a JSON value cut for a message.
func short(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

// Read reads every case of a case file from r; name is the file's name,
// used in errors and, without its extension, as the set of lines that
// name none. Blank lines are skipped. The first bad line ends the read
// with an error naming name:line.
func Read(r io.Reader, name string) ([]Case, error) {
	set := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes+2) // a line of MaxLineBytes and its "\r\n"
	var out []Case
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSuffix(sc.Bytes(), []byte("\r"))) > MaxLineBytes {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line, MaxLineBytes)
		}
		b := bytes.Trim(sc.Bytes(), " \t\r\n") // JSON's whitespace: a line of U+00A0 is not blank
		if len(b) == 0 {
			continue
		}
		c, err := ParseLine(b, set)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		c.File, c.Line = name, line
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, MaxLineBytes)
		}
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return out, nil
}

// ReadFiles reads the case files in order and returns their cases, the
// first limit of each file when limit > 0. A case id may appear once
// across all the files: a repeat is an error naming both places.
func ReadFiles(limit int, paths ...string) ([]Case, error) {
	var out []Case
	seen := map[string]string{}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		cs, err := Read(f, path)
		f.Close()
		if err != nil {
			return nil, err
		}
		if len(cs) == 0 {
			return nil, fmt.Errorf("%s: no cases", path)
		}
		if limit > 0 && len(cs) > limit {
			cs = cs[:limit]
		}
		for _, c := range cs {
			if at, ok := seen[c.ID]; ok {
				return nil, fmt.Errorf("%s: case id %q is already used at %s", c.Where(), c.ID, at)
			}
			seen[c.ID] = c.Where()
		}
		out = append(out, cs...)
	}
	return out, nil
}
