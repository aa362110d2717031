package cases

import (
	"encoding/json"
	"strconv"
	"testing"

	"system1/internal/decision"
	"system1/internal/systemone"
)

// FuzzCaseLine feeds ParseLine any bytes. It must never panic, and a line
// it accepts must be a usable case: an id, a set, one expected option per
// question among its options, and a request that goes out on the wire and
// comes back as the same case.
func FuzzCaseLine(f *testing.F) {
	f.Add([]byte(agnews))
	f.Add([]byte(`{"id":"s","set":"sst2","state":"fine","questions":{"positive":{"type":"noul","criteria":{"true":"likes","false":"dislikes"}}},"expected":{"positive":true}}`))
	f.Add([]byte(`{"id":"s5","state":{"a":[1]},"questions":{"s":{"type":"score","criteria":["a","b","c"]}},"expected":{"s":2}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParseLine(line, "fuzz")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if c.ID == "" || c.Set == "" {
			t.Fatalf("accepted a case without an id or set: %+v", c)
		}
		qs := c.Request.Questions
		if len(qs) == 0 || len(c.Expected) != len(qs) {
			t.Fatalf("%d questions, %d expected", len(qs), len(c.Expected))
		}
		for i, q := range qs {
			if c.Expected[i] < 0 || c.Expected[i] >= len(q.Options) {
				t.Fatalf("question %s: expected %d of %d options", q.ID, c.Expected[i], len(q.Options))
			}
		}

		// Out on the wire and back: the same questions and answers.
		req := c.Request
		req.Model = "m"
		body := systemone.AppendRequest(nil, req)
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("the request does not encode: %v\n%s", err, body)
		}
		exp := []byte("{")
		for i, q := range qs {
			if i > 0 {
				exp = append(exp, ',')
			}
			k, _ := json.Marshal(q.ID)
			exp = append(exp, k...)
			exp = append(exp, ':')
			exp = append(exp, expectedJSON(q, c.Expected[i])...)
		}
		exp = append(exp, '}')
		id, _ := json.Marshal(c.ID)
		set, _ := json.Marshal(c.Set)
		top["id"], top["set"], top["expected"] = id, set, exp
		again, err := json.Marshal(top)
		if err != nil {
			t.Fatal(err)
		}
		// json.Marshal of a map sorts keys but keeps each value verbatim,
		// so question and criteria order survive.
		c2, err := ParseLine(again, "other")
		if err != nil {
			t.Fatalf("the case re-encoded does not read: %v\n%s", err, again)
		}
		if c2.ID != c.ID || c2.Set != c.Set || len(c2.Request.Questions) != len(qs) {
			t.Fatalf("round trip changed the case: %+v vs %+v", c2, c)
		}
		for i, q := range qs {
			q2 := c2.Request.Questions[i]
			if q2.ID != q.ID || q2.Kind != q.Kind || len(q2.Options) != len(q.Options) || c2.Expected[i] != c.Expected[i] {
				t.Fatalf("question %d changed: %+v %d vs %+v %d", i, q2, c2.Expected[i], q, c.Expected[i])
			}
			for j := range q.Options {
				if q2.Options[j].Key != q.Options[j].Key {
					t.Fatalf("question %s option %d: %q vs %q", q.ID, j, q2.Options[j].Key, q.Options[j].Key)
				}
			}
		}
	})
}

// expectedJSON writes option idx of q as a case file's expected answer.
func expectedJSON(q decision.Question, idx int) []byte {
	switch q.Kind {
	case decision.Noul:
		return []byte(strconv.FormatBool(idx == 0))
	case decision.Score:
		return []byte(strconv.Itoa(idx))
	}
	b, _ := json.Marshal(q.Options[idx].Key)
	return b
}
