package decisionlog

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
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
	steps := [][]Step{nil, {}, {{Name: "contextual", Version: "cf-1", Dist: []float64{0.4, 0.6}}, {Name: StepTemperature, Version: "v<1>", Dist: nil}},
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
