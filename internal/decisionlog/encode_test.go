package decisionlog

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	"system1/internal/decision"
)

// TestEncodeAsMarshal checks that the writer's encoders write exactly what
// json.Marshal writes for the same values, and refuse what it refuses.
func TestEncodeAsMarshal(t *testing.T) {
	marshal := func(v any) (string, bool) {
		b, err := json.Marshal(v)
		return string(b), err == nil
	}
	strs := [][]string{nil, {}, {"billing", "technical"}, {`a"b`, `back\slash`, "<tag>&amp;", "tab\tnew\nline\x01"},
		{"caf\u00e9", "\u2028\u2029", "bad \xff utf-8", "emoji \U0001F600", ""}}
	for _, ss := range strs {
		want, _ := marshal(nonNilSlice(ss))
		if got := string(appendStrings(nil, ss)); got != want {
			t.Errorf("strings %q: %s, json.Marshal %s", ss, got, want)
		}
	}
	floats := [][]float64{nil, {}, {0, math.Copysign(0, -1), 1, 0.1, 1.0 / 3, 123.456}, {1e-6, 9.99e-7, 1e-9, 1e-300, 5e-324},
		{1e20, 1e21, 1.5e22, math.MaxFloat64, -2.5e-8}, {math.NaN()}, {0.5, math.Inf(1)}, {math.Inf(-1)}}
	for _, fs := range floats {
		want, wantOK := marshal(nonNilSlice(fs))
		b, ok := appendFloats(nil, fs)
		if ok != wantOK || (ok && string(b) != want) {
			t.Errorf("floats %v: %s %v, json.Marshal %s %v", fs, b, ok, want, wantOK)
		}
	}
	steps := [][]Step{nil, {}, {{Name: "contextual", Version: "cf-1", Dist: []float64{0.4, 0.6}}, {Name: decision.StepTemperature, Version: "v<1>", Dist: nil}},
		{{Name: "x", Dist: []float64{}}}, {{Name: "bad", Dist: []float64{math.NaN()}}}}
	for _, st := range steps {
		want, wantOK := marshal(nonNilSlice(st))
		b, ok := appendSteps(nil, st)
		if ok != wantOK || (ok && string(b) != want) {
			t.Errorf("steps %v: %s %v, json.Marshal %s %v", st, b, ok, want, wantOK)
		}
	}
	// appendSteps writes Step's fields by hand: a new one must be added
	// there (and here).
	if n := reflect.TypeFor[Step]().NumField(); n != 3 {
		t.Errorf("Step has %d fields; appendSteps writes 3", n)
	}
}

// nonNilSlice is s, or an empty slice for nil: the log stores [] for none.
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// TestInsertBatchesOfAnySize writes batches whose sizes are and are not
// the prepared INSERTs' (1, 2, 4 ... 64 rows), twice each so the second
// reuses the statements, and reads every record back.
func TestInsertBatchesOfAnySize(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := b.open(t, Options{})
			total := 0
			for _, n := range []int{1, 3, 64, 65, 127, 200} {
				for round := range 2 {
					recs := make([]Record, n)
					for i := range recs {
						recs[i] = sample(fmt.Sprintf("req_%d_%d_%d", n, round, i), "q", t0)
					}
					if bad, err := l.store.insert(ctx, recs, false); bad != 0 || err != nil {
						t.Fatalf("%d records: %d bad, %v", n, bad, err)
					}
					total += n
					for _, i := range []int{0, n - 1} {
						es, err := l.Lookup(ctx, recs[i].RequestID)
						if err != nil || len(es) != 1 || !reflect.DeepEqual(es[0].EngineDist, recs[i].EngineDist) {
							t.Fatalf("%d records: record %d read back as %+v, %v", n, i, es, err)
						}
					}
				}
			}
			if got := count(t, l, "decisions"); got != total {
				t.Errorf("%d rows, wrote %d", got, total)
			}
		})
	}
}
