package decisionlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"system1/internal/decision"
)

// variedRecord is the i-th of a spread of records: every kind, steps
// before, at and after a temperature step or none, a step without a
// distribution, none_option, options that need escaping or are not
// ASCII, numbers in e-notation, a label mass or none.
func variedRecord(r *rand.Rand, i int, at time.Time) Record {
	k := 2 + r.IntN(5)
	opts := make([]string, k)
	for j := range opts {
		opts[j] = fmt.Sprintf("o%d", j)
	}
	switch i % 7 {
	case 1:
		opts[k-1] = decision.NoneOption
	case 2:
		opts[0] = NoneFit // a choice whose option is named none
	case 3:
		opts[1] = `say "hi"` // escaped: decoded the slow way
	case 4:
		opts[0] = "café ☕"
	}
	dist := func() []float64 {
		d := make([]float64, k)
		for j := range d {
			d[j] = r.ExpFloat64()
			if r.IntN(5) == 0 {
				d[j] *= 1e-9
			}
		}
		return d
	}
	var steps []Step
	names := []string{decision.StepDebias, decision.StepPrior, decision.StepTemperature, "contextual"}
	for range r.IntN(4) {
		st := Step{Name: names[r.IntN(len(names))], Version: "v1", Dist: dist()}
		if r.IntN(6) == 0 {
			st.Dist = nil
		}
		steps = append(steps, st)
	}
	rec := Record{RequestID: fmt.Sprintf("req-%d", i), QuestionID: fmt.Sprintf("q%d", i%2), Time: at, Face: []string{FaceDecide, FaceMCP, FaceSystemOne}[i%3],
		Model: []string{"m1", "m2"}[i%2], Node: "n", Fingerprint: []string{"", "fp-a"}[i%2], Kind: []decision.Kind{decision.Choice, decision.Noul, decision.Score}[i%3],
		Options: opts, EngineDist: dist(), Steps: steps}
	if i%4 != 0 {
		rec.LabelMass = mass(r.Float64())
	}
	return rec
}

// The one-pass reader reads the columns as the writer writes them as
// encoding/json does, and takes every one without an escape itself.
func TestParseCaseReadsWhatTheWriterWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		rec := variedRecord(r, i, time.Now())
		opts := appendStrings(nil, rec.Options)
		eng, _ := appendFloats(nil, rec.EngineDist)
		steps, _ := appendSteps(nil, rec.Steps)
		for _, outcome := range append(slices.Clone(rec.Options), NoneFit, "gone") {
			var fast, slow Case
			ok := parseCase(&fast, opts, eng, steps, outcome)
			if err := decodeCase(&slow, opts, eng, steps, outcome); err != nil {
				t.Fatal(err)
			}
			escaped := bytes.Contains(opts, []byte(`\`))
			if ok == escaped {
				t.Errorf("record %d: read in one pass %v, escapes %v: %s", i, ok, escaped, opts)
			}
			if ok && !reflect.DeepEqual(fast, slow) {
				t.Errorf("record %d, outcome %q:\n got %+v\nwant %+v", i, outcome, fast, slow)
			}
		}
	}
}

// FuzzParseCaseAsDecode holds parseCase to decodeCase: on any columns it
// takes, it gives what encoding/json gives; and it takes every row the
// writer could have written without an escape.
func FuzzParseCaseAsDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		rec := variedRecord(r, i, time.Now())
		opts := appendStrings(nil, rec.Options)
		eng, _ := appendFloats(nil, rec.EngineDist)
		steps, _ := appendSteps(nil, rec.Steps)
		f.Add(string(opts), string(eng), string(steps), rec.Options[0])
	}
	for _, c := range [][4]string{
		{`[]`, `[]`, `[]`, ``},
		{`null`, `null`, `null`, `none`},
		{` [ "a" , "b" ] `, ` [ 0.5 , 5e-1 ] `, ` [ ] `, `b`},
		{`["a","a"]`, `[1E2,-0,0.0e+0]`, `[{"name":"temperature","version":"","dist":null}]`, `a`},
		{`["a"]`, `[1]`, `[{"Name":"temperature","version":"","dist":[2]}]`, `a`},
		{`["a"]`, `[1]`, `[{"name":"x","version":"","dist":[2],"name":"temperature"}]`, `a`},
		{`["a"]`, `[1]`, `[{"version":"","name":"temperature","dist":[2]}]`, `a`},
		{`["a"]`, `[1e400]`, `[]`, `a`},
		{`["a"]`, `[1]`, `[{"name":"temperature","version":"","dist":[1e309]}]`, `a`},
		{`["a"]`, `[1.7976931348623157e308, 1e-400, 0.0000000001e318]`, `[]`, `a`},
		{`["a"]`, `[01]`, `[]`, `a`},
		{`["a"]`, `[1.]`, `[]`, `a`},
		{`["a"]`, `[.5]`, `[]`, `a`},
		{`["a"]`, `[1,]`, `[]`, `a`},
		{`["a",]`, `[1]`, `[]`, `a`},
		{`["a"] x`, `[1]`, `[]`, `a`},
		{"[\"\xff\"]", `[1]`, `[]`, "\xff"},
		{"[\"\t\"]", `[1]`, `[]`, "\t"},
		{`["\u00e9"]`, `[1]`, `[]`, `é`},
		{`[1]`, `[1]`, `[]`, `1`},
		{`["a"]`, `[null]`, `[]`, `a`},
		{`["a"]`, `["1"]`, `[]`, `a`},
		{`["a"]`, `[1]`, `[{"name":"debias","version":"v","dist":[0.3]},{"name":"temperature","version":"v","dist":[0.2]},{"name":"temperature","version":"v","dist":[0.1]}]`, `a`},
		{`["a"]`, `[1]`, `[{"name":"debias","version":"v","dist":[0.3]}]`, `a`},
		{`["a"]`, `[1]`, `[{"name":"debias","version":"v","dist":[0.3]},]`, `a`},
		{`["a"]`, `[1]`, `[{"name":"debias","version":"v","dist":[0.3]}`, `a`},
		{`["a"]`, `[1]`, `[{"name":"debias","version":1,"dist":[0.3]}]`, `a`},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, opts, eng, steps, outcome string) {
		var fast, slow Case
		ok := parseCase(&fast, []byte(opts), []byte(eng), []byte(steps), outcome)
		err := decodeCase(&slow, []byte(opts), []byte(eng), []byte(steps), outcome)
		if ok {
			if err != nil {
				t.Fatalf("read in one pass, but encoding/json says %v", err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("one pass %+v, encoding/json %+v", fast, slow)
			}
			return
		}
		if err != nil {
			return
		}
		// What the writer would have written of it, without an escape
		// in any of its strings, must be read in one pass.
		var e Entry
		_ = json.Unmarshal([]byte(opts), &e.Options)
		_ = json.Unmarshal([]byte(eng), &e.EngineDist)
		_ = json.Unmarshal([]byte(steps), &e.Steps)
		o := appendStrings(nil, e.Options)
		g, fine := appendFloats(nil, e.EngineDist)
		s, fine2 := appendSteps(nil, e.Steps)
		if fine && fine2 && e.Options != nil && e.EngineDist != nil && e.Steps != nil && !bytes.Contains(o, []byte(`\`)) && !bytes.Contains(s, []byte(`\`)) &&
			string(o) == opts && string(g) == eng && string(s) == steps {
			t.Fatalf("the writer's own form was not read in one pass: %s %s %s", opts, eng, steps)
		}
	})
}

// EachCase reads of each record with an outcome what its Entry gives,
// on both stores: the records decoded whole (Window) and their Case are
// what the one-pass read returns, in record order.
func TestEachCaseIsTheEntriesCase(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			r := rand.New(rand.NewPCG(7, 8))
			now := time.Now().Add(-time.Hour)
			var recs []Record
			for i := range 300 {
				rec := variedRecord(r, i, now.Add(-time.Duration(r.IntN(1000))*time.Second))
				recs = append(recs, rec)
				l.Record(rec)
			}
			if err := l.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for i, rec := range recs {
				if i%5 == 4 {
					continue // no outcome
				}
				outs := []string{rec.Options[r.IntN(len(rec.Options))]}
				if i%6 == 0 {
					outs = append(outs, NoneFit) // corrected: the latest wins
				}
				for _, o := range outs {
					if _, err := l.Outcome(ctx, rec.RequestID, rec.QuestionID, o); err != nil {
						t.Fatal(err)
					}
				}
			}
			var got []Case
			if _, err := l.eachCase(ctx, 7, func(c Case) { got = append(got, c) }); err != nil {
				t.Fatal(err)
			}
			entries, err := l.WindowLabelled(ctx, now.Add(-time.Hour), now.Add(time.Hour), "")
			if err != nil {
				t.Fatal(err)
			}
			sort.Slice(entries, func(i, j int) bool { return entries[i].ID < entries[j].ID })
			if len(got) != len(entries) || len(got) != 240 {
				t.Fatalf("%d cases, %d entries with an outcome, want 240", len(got), len(entries))
			}
			for i, e := range entries {
				want := e.Case()
				if !reflect.DeepEqual(got[i], want) {
					t.Errorf("record %d:\n got %+v\nwant %+v", e.ID, got[i], want)
				}
			}
			if !slices.ContainsFunc(got, func(c Case) bool { return c.NoOptionFit }) || !slices.ContainsFunc(got, func(c Case) bool { return c.NoneOption }) ||
				!slices.ContainsFunc(got, func(c Case) bool { return !c.HasLabelMass }) {
				t.Error("the log lacks a kind of case the test means to cover")
			}
		})
	}
}
