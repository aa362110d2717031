package decisionlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"system1/internal/decision"
)

// Case is a record with an outcome as calibration statistics read it:
// what EachCase reads of each record, without the rest.
type Case struct {
	ID int64
	// At is the decision time, in nanoseconds since the epoch.
	At          int64
	RequestID   string
	Face        string
	Model       string
	Node        string
	Fingerprint string
	Kind        decision.Kind
	// Options is how many options the question had.
	Options int
	// Expected is the latest outcome's index among the options, -1 when
	// it is none of them.
	Expected int
	// NoOptionFit is Entry.NoOptionFit: the outcome says none fit.
	NoOptionFit bool
	// NoneOption reports whether decision.NoneOption is one of the
	// options (asked with none_option).
	NoneOption bool
	// Dist is Entry.Uncalibrated: the distribution before calibration.
	Dist decision.Distribution
	// LabelMass is Entry.LabelMass where HasLabelMass.
	LabelMass    float64
	HasLabelMass bool
}

// Case is the entry as EachCase reads it, with its latest outcome (none:
// Expected is -1).
func (e Entry) Case() Case {
	c := Case{ID: e.ID, At: e.Time.UnixNano(), RequestID: e.RequestID, Face: e.Face, Model: e.Model, Node: e.Node, Fingerprint: e.Fingerprint, Kind: e.Kind}
	if e.LabelMass != nil {
		c.LabelMass, c.HasLabelMass = *e.LabelMass, true
	}
	c.fill(e.Options, e.Uncalibrated(), e.Outcome)
	return c
}

// fill sets what c takes of the options, the distribution before
// calibration and the latest outcome.
func (c *Case) fill(options []string, dist []float64, o *Outcome) {
	c.Options, c.Dist, c.Expected = len(options), dist, -1
	c.NoneOption = slices.Contains(options, decision.NoneOption)
	if o != nil {
		c.Expected = slices.Index(options, o.Value)
		c.NoOptionFit = o.Value == NoneFit && !slices.Contains(options, NoneFit)
	}
}

// EachCase calls fn with every record that has an outcome recorded up to
// the outcome id it returns (the last one recorded when it starts), with
// its latest outcome, in record order. It reads the outcomes once and
// then the records once, in the order they are stored, in batches: a
// reader starting on a large log reads it in two sequential passes, not
// one lookup an outcome as OutcomesAfter does (a million outcomes took
// 112 s that way on SQLite). Of each record it reads only the columns a
// Case holds, and of their JSON only what it needs, in one pass
// (parseCase): decoding whole records was most of a first read's time.
// Read on with OutcomesAfter from the id returned.
func (l *Log) EachCase(ctx context.Context, fn func(Case)) (upTo int64, err error) {
	return l.eachCase(ctx, 5000, fn)
}

// eachCase is EachCase reading batch records at a time.
func (l *Log) eachCase(ctx context.Context, batch int, fn func(Case)) (upTo int64, err error) {
	upTo, err = l.store.id(ctx, "SELECT MAX(id) FROM outcomes")
	if err != nil {
		return 0, fmt.Errorf("decision log: outcomes: %w", err)
	}
	if upTo == 0 {
		return 0, nil
	}
	latest, err := l.store.latestOutcomes(ctx, upTo)
	if err != nil {
		return 0, fmt.Errorf("decision log: outcomes: %w", err)
	}
	var cases []Case // a batch's, reused
	for after := int64(0); ; {
		n, last, err := l.store.casesAfter(ctx, after, batch, latest, &cases)
		if err != nil {
			return 0, fmt.Errorf("decision log: records: %w", err)
		}
		for _, c := range cases {
			fn(c)
		}
		if n < batch {
			return upTo, nil
		}
		after = last
	}
}

// latestOutcomes reads every outcome up to id upTo, in the order
// recorded, and returns the latest value of each request and question.
func (s *store) latestOutcomes(ctx context.Context, upTo int64) (map[[2]string]string, error) {
	out := map[[2]string]string{}
	err := s.each(ctx, "SELECT request_id, question_id, outcome FROM outcomes WHERE id <= ? ORDER BY id", []any{upTo}, func(rows *sql.Rows) error {
		var req, q, value string
		if err := rows.Scan(&req, &q, &value); err != nil {
			return err
		}
		out[[2]string{req, q}] = value
		return nil
	})
	return out, err
}

// casesAfter reads up to limit decisions rows after id after, in id
// order, into cases those latest has an outcome for. It returns how many
// rows it read and the last one's id.
func (s *store) casesAfter(ctx context.Context, after int64, limit int, latest map[[2]string]string, cases *[]Case) (n int, last int64, err error) {
	*cases = (*cases)[:0]
	var question, kind string
	var opts, eng, steps sql.RawBytes // valid until the next row: parsed before it
	var mass sql.NullFloat64
	err = s.each(ctx, `SELECT id, request_id, question_id, at_ns, face, model, node, kind, options, engine_dist, steps, label_mass, fingerprint
		FROM decisions WHERE id > ? ORDER BY id LIMIT ?`, []any{after, limit}, func(rows *sql.Rows) error {
		var c Case
		if err := rows.Scan(&c.ID, &c.RequestID, &question, &c.At, &c.Face, &c.Model, &c.Node, &kind, &opts, &eng, &steps, &mass, &c.Fingerprint); err != nil {
			return err
		}
		n, last = n+1, c.ID
		outcome, ok := latest[[2]string{c.RequestID, question}]
		if !ok {
			return nil
		}
		c.Kind = decision.Kind(kind)
		c.LabelMass, c.HasLabelMass = mass.Float64, mass.Valid
		if !parseCase(&c, opts, eng, steps, outcome) {
			if err := decodeCase(&c, opts, eng, steps, outcome); err != nil {
				return fmt.Errorf("row %d: %w", c.ID, err)
			}
		}
		*cases = append(*cases, c)
		return nil
	})
	return n, last, err
}

// decodeCase fills c from a row's options, engine_dist and steps columns
// as scanEntry decodes them, with encoding/json: what parseCase gives
// where it can.
func decodeCase(c *Case, opts, eng, steps []byte, outcome string) error {
	var e Entry
	for _, f := range []struct {
		raw []byte
		to  any
	}{{opts, &e.Options}, {eng, &e.EngineDist}, {steps, &e.Steps}} {
		if err := json.Unmarshal(f.raw, f.to); err != nil {
			return err
		}
	}
	c.fill(e.Options, e.Uncalibrated(), &Outcome{Value: outcome})
	return nil
}

// parseCase fills c as decodeCase does, in one pass over each column and
// decoding only the distribution c keeps, when the columns are in the
// form the writer gives them (appendStrings, appendFloats, appendSteps):
// strings without escapes, steps' keys name, version and dist in that
// order. It reports false, having set nothing, for anything else, valid
// JSON or not, which decodeCase then reads (and rejects as it would).
// FuzzParseCaseAsDecode holds the two to the same answers.
func parseCase(c *Case, opts, eng, steps []byte, outcome string) bool {
	n, expected, noneOption, none, ok := parseOptions(opts, outcome)
	if !ok {
		return false
	}
	engEnd, ok := floatsEnd(eng, skipSpace(eng, 0))
	if !ok || skipSpace(eng, engEnd) != len(eng) {
		return false
	}
	dist, ok := parseSteps(steps)
	if !ok {
		return false
	}
	if dist == nil {
		dist = eng
	}
	c.Options, c.Expected, c.NoneOption = n, expected, noneOption
	c.NoOptionFit = outcome == NoneFit && !none
	c.Dist = parseFloats(dist)
	return true
}

// parseOptions reads a JSON array of strings: their count, the index of
// the first that is outcome (-1: none), and whether decision.NoneOption
// and NoneFit are among them.
func parseOptions(b []byte, outcome string) (n, expected int, noneOption, none, ok bool) {
	expected = -1
	end, ok := array(b, skipSpace(b, 0), func(b []byte, i int) (int, bool) {
		s, end, fine := plainString(b, i)
		if fine {
			if expected < 0 && string(s) == outcome {
				expected = n
			}
			noneOption = noneOption || string(s) == decision.NoneOption
			none = none || string(s) == NoneFit
			n++
		}
		return end, fine
	})
	return n, expected, noneOption, none, ok && skipSpace(b, end) == len(b)
}

// parseSteps reads a JSON array of steps and returns the JSON of the
// distribution before the first temperature step (Entry.Uncalibrated):
// the last step's before it, nil for the engine's.
func parseSteps(b []byte) (dist []byte, ok bool) {
	found := false // the first temperature step
	end, ok := array(b, skipSpace(b, 0), func(b []byte, i int) (int, bool) {
		if i >= len(b) || b[i] != '{' {
			return i, false
		}
		var name []byte
		for k, key := range []string{"name", "version", "dist"} {
			i = skipSpace(b, i+1) // past '{' or ','
			s, end, fine := plainString(b, i)
			if !fine || string(s) != key {
				return i, false
			}
			if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
				return i, false
			}
			i = skipSpace(b, i+1)
			if k < 2 {
				if s, end, fine = plainString(b, i); !fine {
					return i, false
				}
				if k == 0 {
					name = s
				}
			} else if end, fine = floatsEnd(b, i); !fine {
				return i, false
			} else if !found {
				if string(name) == decision.StepTemperature {
					found = true
				} else {
					dist = b[i:end]
				}
			}
			if i = skipSpace(b, end); i >= len(b) || b[i] != ",}"[k/2] {
				return i, false
			}
		}
		return i + 1, true
	})
	if !ok || skipSpace(b, end) != len(b) {
		return nil, false
	}
	return dist, true
}

// floatsEnd checks the JSON array of numbers, or null, at b[i] and
// returns where it ends.
func floatsEnd(b []byte, i int) (int, bool) {
	if i+4 <= len(b) && string(b[i:i+4]) == "null" {
		return i + 4, true
	}
	return array(b, i, numberEnd)
}

// array checks the JSON array at b[i], of elements elem checks from where
// each starts, and returns where it ends.
func array(b []byte, i int, elem func(b []byte, i int) (end int, ok bool)) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return i, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		end, ok := elem(b, i)
		if !ok {
			return i, false
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// parseFloats decodes an array floatsEnd accepted: nil for null.
func parseFloats(b []byte) decision.Distribution {
	i := skipSpace(b, 0)
	if b[i] == 'n' {
		return nil
	}
	n := 0
	if j := skipSpace(b, i+1); b[j] != ']' {
		n = 1
		for _, c := range b {
			if c == ',' {
				n++
			}
		}
	}
	out := make(decision.Distribution, 0, n)
	for i = skipSpace(b, i+1); len(out) < n; {
		end := i // a number checked by numberEnd ends at a separator
		for end < len(b) && b[end] != ',' && b[end] != ']' && skipSpace(b, end) == end {
			end++
		}
		f, _ := strconv.ParseFloat(string(b[i:end]), 64)
		out = append(out, f)
		i = skipSpace(b, skipSpace(b, end)+1)
	}
	return out
}

// numberEnd checks the JSON number at b[i] and returns where it ends. It
// reports false for a number a float64 cannot hold, which encoding/json
// rejects.
func numberEnd(b []byte, i int) (int, bool) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - j
	}
	var whole int // digits of the integer part, but for a lone 0
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		whole = digits()
	default:
		return start, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return start, false
		}
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		j := i
		if digits() == 0 {
			return start, false
		}
		for _, c := range b[j:i] {
			exp = min(exp*10+int(c-'0'), 1<<20)
		}
		if neg {
			exp = -exp
		}
	}
	// Under 10^308 a number cannot overflow; past it, ask.
	if whole+exp > 308 {
		if _, err := strconv.ParseFloat(string(b[start:i]), 64); err != nil {
			return start, false
		}
	}
	return i, true
}

// plainString reads the JSON string at b[i] and returns its contents,
// where they need no unescaping: no backslash, no control character,
// valid UTF-8.
func plainString(b []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s = b[i+1 : j]
			return s, j + 1, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, i, false
}

// skipSpace skips JSON whitespace from b[i].
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
