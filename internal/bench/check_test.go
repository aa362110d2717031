package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"system1/internal/decision"
)

// record is a case of one noul answered p for true, by build.
func record(id string, p float64, build string) Record {
	return Record{ID: id, Set: "s", Questions: []Question{{ID: "q", Kind: decision.Noul, Options: 2, Expected: 0,
		Dist: decision.Distribution{p, 1 - p}, Build: build}}}
}

func records(n int, p float64, build string) []Record {
	var out []Record
	for i := range n {
		out = append(out, record(string(rune('a'+i)), p, build))
	}
	return out
}

// A baseline holds its own answers; it says what it could not compare
// (too few cases for a set rule, builds not known) without failing on
// it; another case set is ErrCaseSet; a baseline of a failed case, or a
// file that is not one, is refused.
func TestBaselineCompare(t *testing.T) {
	held := func(checks []Check, name string) (Check, bool) {
		for _, c := range checks {
			if strings.HasPrefix(c.Name, name) {
				return c, true
			}
		}
		return Check{}, false
	}
	for _, tc := range []struct {
		name      string
		base, now []Record
		drifted   []string // the checks that must not hold
		note      map[string]string
	}{
		{"itself", records(12, 0.8, "b1"), records(12, 0.8, "b1"), nil, nil},
		{"too few for sets", records(3, 0.8, "b1"), records(3, 0.8, "b1"), nil, map[string]string{"set coverage": "not measured"}},
		{"builds unknown", records(12, 0.8, ""), records(12, 0.8, ""), nil, map[string]string{"build": "not compared"}},
		{"build unknown now", records(12, 0.8, "b1"), records(12, 0.8, ""), []string{"build"}, nil},
		{"flipped and another build", records(12, 0.8, "b1"), records(12, 0.3, "b2"), []string{"accuracy", "ECE", "flip rate", "build", "set coverage"}, nil},
		{"one failed", records(12, 0.8, "b1"), append(records(11, 0.8, "b1"), Record{ID: "l", Error: "down", Questions: []Question{{ID: "q", Kind: decision.Noul, Options: 2}}}), []string{"failed requests"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBaseline("m", "now", tc.base)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(b)
			if b, err = LoadBaseline(data); err != nil {
				t.Fatal(err)
			}
			checks, err := b.Compare(tc.now, DefaultThresholds)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range checks {
				want := !slicesContains(tc.drifted, c.Name)
				if c.Held != want {
					t.Errorf("%s: held %v, want %v (%+v)", c.Name, c.Held, want, c)
				}
			}
			for name, want := range tc.note {
				if c, ok := held(checks, name); !ok || !strings.Contains(c.Limit, want) {
					t.Errorf("%s: %+v, want %q", name, c, want)
				}
			}
			if Held(checks) != (len(tc.drifted) == 0) {
				t.Errorf("Held %v with %v drifted", Held(checks), tc.drifted)
			}
			var j bytes.Buffer
			if err := WriteJUnit(&j, "s", checks); err != nil || strings.Count(j.String(), "<failure") != len(tc.drifted) {
				t.Errorf("JUnit with %d failures: %v\n%s", len(tc.drifted), err, j.String())
			}
		})
	}

	b, _ := NewBaseline("m", "now", records(4, 0.8, "b1"))
	if _, err := b.Compare(records(3, 0.8, "b1"), DefaultThresholds); !errors.Is(err, ErrCaseSet) {
		t.Errorf("fewer cases: %v", err)
	}
	other := records(4, 0.8, "b1")
	other[3].ID = "z"
	if _, err := b.Compare(other, DefaultThresholds); !errors.Is(err, ErrCaseSet) {
		t.Errorf("another case: %v", err)
	}
	// The same ids over edited cases: another label, option count,
	// kind or question is another case set, not drift.
	for name, edit := range map[string]func(*Question){
		"another label": func(q *Question) { q.Expected = 1 },
		"another option count": func(q *Question) {
			q.Options, q.Kind, q.Dist = 3, decision.Choice, decision.Distribution{0.8, 0.1, 0.1}
		},
		"another question": func(q *Question) { q.ID = "q2" },
	} {
		edited := records(4, 0.8, "b1")
		edit(&edited[2].Questions[0])
		if _, err := b.Compare(edited, DefaultThresholds); !errors.Is(err, ErrCaseSet) || !strings.Contains(err.Error(), "case c") {
			t.Errorf("%s: %v, want ErrCaseSet naming case c", name, err)
		}
	}
	if _, err := NewBaseline("m", "now", []Record{{ID: "a", Error: "down"}}); err == nil {
		t.Error("a baseline of a failed case")
	}
	if _, err := NewBaseline("m", "now", []Record{record("a", 0.8, ""), record("a", 0.7, "")}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a baseline of one id twice: %v", err)
	}
	for _, bad := range []string{``, `[]`, `{"version": 2, "cases": []}`, `{"version": 1, "cases": []}`,
		`{"version": 1, "cases": [{"id": "a", "questions": [{"id": "q", "dist": [1, 0]}]}, {"id": "a", "questions": [{"id": "q", "dist": [1, 0]}]}]}`,
		`{"version": 1, "sets": {"method": "lac", "coverage": 2}, "cases": [{"id": "a", "questions": [{"id": "q", "dist": [1, 0]}]}]}`} {
		if _, err := LoadBaseline([]byte(bad)); err == nil {
			t.Errorf("LoadBaseline(%s) took it", bad)
		}
	}
}

func slicesContains(s []string, name string) bool {
	for _, x := range s {
		if strings.HasPrefix(name, x) {
			return true
		}
	}
	return false
}

// A score's answer is its expected level, rounded: a run whose answers
// are the baseline's has flipped none, whichever level holds the most
// probability, and one whose answers moved has flipped them all.
func TestFlipRateOfScoresIsTheirAnswer(t *testing.T) {
	score := func(id string, dist ...float64) Record {
		return Record{ID: id, Set: "s", Questions: []Question{{ID: "q", Kind: decision.Score, Options: len(dist), Expected: 1, Dist: dist}}}
	}
	scores := func(n int, dist ...float64) []Record {
		var out []Record
		for i := range n {
			out = append(out, score(string(rune('a'+i)), dist...))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		base, now []Record
		want      string
	}{
		// Answered 1 both times (expected levels 1.0 and 1.02), though
		// the most probable level moved from 0 to 2.
		{"same answer, another top level", scores(12, 0.45, 0.1, 0.45), scores(12, 0.44, 0.1, 0.46), "0.000 (0/12)"},
		// Answered 1, then 2 (expected level 1.9), the most probable
		// level 1 both times.
		{"another answer, same top level", scores(12, 0.1, 0.8, 0.1, 0), scores(12, 0, 0.4, 0.3, 0.3), "1.000 (12/12)"},
	} {
		b, err := NewBaseline("m", "now", tc.base)
		if err != nil {
			t.Fatal(err)
		}
		checks, err := b.Compare(tc.now, Thresholds{AccuracyDrop: 1, ECERise: 1, CoverageDrop: 1, FlipRate: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			if c.Name == "flip rate" && c.Now != tc.want {
				t.Errorf("%s: flip rate %s, want %s", tc.name, c.Now, tc.want)
			}
		}
	}
}
