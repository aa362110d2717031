package calibration

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"system1/internal/decision"
)

const goodFits = `{
  "version": 1,
  "created": "2025-06-01T12:00:00Z",
  "fits": [
    {"provider": "local", "model": "qwen", "kind": "choice", "bucket": "3-4", "temperature": 1.8, "n": 400,
     "nll_before": 0.9, "nll_after": 0.7, "ece_before": 0.12, "ece_after": 0.03,
     "holdout": {"n": 100, "nll_before": 0.95, "nll_after": 0.72, "ece_before": 0.13, "ece_after": 0.04},
     "date": "2025-06-01"},
    {"provider": "", "model": "qwen", "kind": "noul", "bucket": "2", "temperature": 0.9, "n": 50,
     "nll_before": 0.5, "nll_after": 0.49, "ece_before": 0.05, "ece_after": 0.04, "date": ""}
  ]
}`

func TestParseFits(t *testing.T) {
	f, err := ParseFits([]byte(goodFits))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 1 || len(f.Fits) != 2 || f.Fits[0].Temperature != 1.8 || f.Fits[0].Holdout.N != 100 || f.Fits[1].Holdout != nil {
		t.Fatalf("parsed %+v", f)
	}
	b, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"provider"`, `"model"`, `"kind"`, `"bucket"`, `"temperature"`, `"n"`, `"nll_before"`, `"nll_after"`, `"ece_before"`, `"ece_after"`, `"holdout"`, `"date"`, `"version"`, `"created"`, `"fits"`} {
		if !strings.Contains(string(b), key+":") {
			t.Errorf("encoding lacks %s:\n%s", key, b)
		}
	}
	again, err := ParseFits(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, again) {
		t.Errorf("round trip changed\n%+v\ninto\n%+v", f, again)
	}
	if f, err := ParseFits([]byte(`{"version": 1}`)); err != nil || len(f.Fits) != 0 {
		t.Errorf("a file without fits: %+v, %v", f, err)
	}
}

func TestParseFitsRejects(t *testing.T) {
	fit := func(fields string) string {
		return `{"version": 1, "fits": [{"kind": "choice", "bucket": "2", "temperature": 1}, {` + fields + `}]}`
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"empty", ``, "EOF"},
		{"not JSON", `version: 1`, "invalid character"},
		{"an array", `[]`, "cannot unmarshal"},
		{"null", `null`, "version 0"},
		{"no version", `{"fits": []}`, "version 0"},
		{"unknown version", `{"version": 2, "fits": []}`, "version 2"},
		{"version as a string", `{"version": "1"}`, "cannot unmarshal"},
		{"unknown field", `{"version": 1, "fitz": []}`, "unknown field"},
		{"unknown field in a fit", fit(`"kind": "noul", "bucket": "2", "temperature": 1, "temprature": 2`), "unknown field"},
		{"trailing data", `{"version": 1} {}`, "after the JSON"},
		{"truncated", `{"version": 1, "fits": [`, "EOF"},
		{"no kind", fit(`"bucket": "2", "temperature": 1`), "fit 1: no kind"},
		{"no bucket", fit(`"kind": "noul", "temperature": 1`), "fit 1: no bucket"},
		{"unknown kind", fit(`"kind": "rank", "bucket": "2", "temperature": 1`), `fit 1: kind "rank"`},
		{"kind in capitals", fit(`"kind": "Choice", "bucket": "2", "temperature": 1`), `fit 1: kind "Choice"`},
		{"unknown bucket", fit(`"kind": "noul", "bucket": "2-4", "temperature": 1`), `fit 1: bucket "2-4"`},
		{"bucket as a count", fit(`"kind": "noul", "bucket": "3", "temperature": 1`), `fit 1: bucket "3"`},
		{"no temperature", fit(`"kind": "noul", "bucket": "2"`), "fit 1: temperature 0"},
		{"negative temperature", fit(`"kind": "noul", "bucket": "2", "temperature": -1`), "fit 1: temperature -1"},
		{"temperature out of range", fit(`"kind": "noul", "bucket": "2", "temperature": 1e999`), "cannot unmarshal"},
		{"temperature as a string", fit(`"kind": "noul", "bucket": "2", "temperature": "NaN"`), "cannot unmarshal"},
		{"negative n", fit(`"kind": "noul", "bucket": "2", "temperature": 1, "n": -3`), "fit 1: n is -3"},
		{"negative nll", fit(`"kind": "noul", "bucket": "2", "temperature": 1, "nll_after": -0.1`), "fit 1: nll_after"},
		{"ece above 1", fit(`"kind": "noul", "bucket": "2", "temperature": 1, "ece_before": 1.5`), "fit 1: ece_before"},
		{"bad holdout", fit(`"kind": "noul", "bucket": "2", "temperature": 1, "holdout": {"n": -1}`), "fit 1: holdout: n is -1"},
		{"bad date", fit(`"kind": "noul", "bucket": "2", "temperature": 1, "date": "01/06/2025"`), `fit 1: date "01/06/2025"`},
		{"impossible date", fit(`"kind": "noul", "bucket": "2", "temperature": 1, "date": "2025-02-30"`), `fit 1: date`},
		{"repeated fit", fit(`"kind": "choice", "bucket": "2", "temperature": 2`), "fit 1 repeats fit 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFits([]byte(tc.data))
			if err == nil {
				t.Fatalf("accepted %+v", f)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestEncodeValidates(t *testing.T) {
	for _, f := range []*Fits{
		nil,
		{Version: 1, Fits: []Fit{{Kind: decision.Noul, Bucket: "2", Temperature: math.Inf(1)}}},
		{Version: 1, Fits: []Fit{{Kind: decision.Noul, Bucket: "2", Temperature: math.NaN()}}},
		{Version: 1, Fits: []Fit{{Kind: decision.Noul, Bucket: "2", Temperature: 1, NLLBefore: math.Inf(1)}}},
		{Version: 1, Fits: []Fit{{Kind: decision.Noul, Bucket: "2", Temperature: 1, Holdout: &Score{ECEAfter: math.NaN()}}}},
	} {
		if b, err := f.Encode(); err == nil {
			t.Errorf("encoded %s", b)
		}
	}
}

func TestLookup(t *testing.T) {
	fits := &Fits{Version: 1, Fits: []Fit{
		{Provider: "gw", Model: "other", Kind: decision.Choice, Bucket: "3-4", Temperature: 1},
		{Provider: "gw", Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 2},
		{Provider: "x", Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 3},
		{Provider: "", Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 4},
		{Provider: "gw", Model: "m", Kind: decision.Noul, Bucket: "2", Temperature: 5},
		{Provider: "x", Model: "m", Kind: decision.Choice, Bucket: "5-10", Temperature: 6},
		{Provider: "", Model: "", Kind: decision.Score, Bucket: "3-4", Temperature: 7},
		{Provider: "y", Model: "n", Kind: decision.Score, Bucket: "3-4", Temperature: 8},
	}}
	for _, tc := range []struct {
		name            string
		provider, model string
		kind            decision.Kind
		options         int
		want            float64 // 0: none found
	}{
		{"provider and model", "gw", "m", decision.Choice, 3, 2},
		{"provider over model", "gw", "zzz", decision.Choice, 4, 1},
		{"provider wins over a model match", "x", "other", decision.Choice, 3, 3},
		{"model without provider prefers a fit with no provider", "", "m", decision.Choice, 3, 4},
		{"unknown provider falls back to model", "nobody", "m", decision.Choice, 4, 4},
		{"model match with a provider", "nobody", "m", decision.Choice, 7, 6},
		{"kind must match", "gw", "m", decision.Score, 3, 0},
		{"bucket must match", "gw", "m", decision.Choice, 11, 0},
		{"noul", "gw", "m", decision.Noul, 2, 5},
		{"nothing matches", "nobody", "none", decision.Choice, 3, 0},
		{"empty names match no fit with empty names", "", "", decision.Score, 3, 0},
		{"another provider's fit of another model", "z", "q", decision.Score, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fits.Lookup(tc.provider, tc.model, tc.kind, tc.options)
			if ok != (tc.want != 0) || got.Temperature != tc.want {
				t.Errorf("found %v (T=%v), want T=%v", ok, got.Temperature, tc.want)
			}
		})
	}
	var none *Fits
	if f, ok := none.Lookup("gw", "m", decision.Choice, 3); ok {
		t.Errorf("a nil *Fits found %+v", f)
	}
	d := decision.Distribution{.6, .3, .1}
	if got, ok := none.Apply("gw", "m", decision.Choice, d); ok || !reflect.DeepEqual(got, d) {
		t.Errorf("a nil *Fits applied: %v", got)
	}
	got, ok := fits.Apply("gw", "m", decision.Choice, d)
	if want := d.Temper(2); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}

// A fit learnt on one build applies to answers of that build, one
// learnt before fingerprints to any build, and one learnt on another
// build to none, which the lookup says; an unknown build is looked up as
// before fingerprints.
func TestLookupServed(t *testing.T) {
	fits := &Fits{Version: 1, Fits: []Fit{
		{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 2, Fingerprint: "aaaa"},
		{Model: "m", Kind: decision.Choice, Bucket: "3-4", Temperature: 3, Fingerprint: "bbbb"},
		{Model: "m", Kind: decision.Noul, Bucket: "2", Temperature: 4},
		{Model: "m", Kind: decision.Noul, Bucket: "2", Temperature: 5, Fingerprint: "bbbb"},
		{Model: "n", Kind: decision.Choice, Bucket: "3-4", Temperature: 6, Fingerprint: "aaaa"},
	}}
	if err := fits.Validate(); err != nil {
		t.Fatalf("fits of one bucket on two builds: %v", err)
	}
	for _, tc := range []struct {
		name               string
		model, fingerprint string
		kind               decision.Kind
		options            int
		want               float64 // 0: none applies
		other              bool
	}{
		{"the build's own fit", "m", "aaaa", decision.Choice, 3, 2, false},
		{"the other build's own fit", "m", "bbbb", decision.Choice, 3, 3, false},
		{"a third build: no fit, and says so", "m", "cccc", decision.Choice, 3, 0, true},
		{"an unknown build: as Lookup", "m", "", decision.Choice, 3, 2, false},
		{"a fit from before fingerprints applies to any build", "m", "cccc", decision.Noul, 2, 4, false},
		{"the build's own fit before an older one", "m", "bbbb", decision.Noul, 2, 5, false},
		{"another model learnt on that build does not apply", "n", "bbbb", decision.Choice, 3, 0, true},
		{"nothing for the model at all", "z", "aaaa", decision.Choice, 3, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, other := fits.LookupServed("", tc.model, tc.fingerprint, tc.kind, tc.options)
			if ok != (tc.want != 0) || got.Temperature != tc.want || other != tc.other {
				t.Errorf("found %v (T=%v), other %v; want T=%v, other %v", ok, got.Temperature, other, tc.want, tc.other)
			}
		})
	}
	dup := &Fits{Version: 1, Fits: []Fit{fits.Fits[0], fits.Fits[0]}}
	if err := dup.Validate(); err == nil || !strings.Contains(err.Error(), `fingerprint "aaaa"`) {
		t.Errorf("one build's fit twice: %v", err)
	}
	var none *Fits
	if _, ok, other := none.LookupServed("", "m", "aaaa", decision.Choice, 3); ok || other {
		t.Error("a nil *Fits found a fit")
	}
}

func FuzzParseFits(f *testing.F) {
	f.Add([]byte(goodFits))
	f.Fuzz(func(t *testing.T, data []byte) {
		fits, err := ParseFits(data)
		if err != nil {
			if fits != nil {
				t.Fatalf("an error with fits %+v", fits)
			}
			return
		}
		b, err := fits.Encode()
		if err != nil {
			t.Fatalf("accepted fits do not encode: %v", err)
		}
		again, err := ParseFits(b)
		if err != nil {
			t.Fatalf("re-encoded fits do not parse: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(fits, again) {
			t.Fatalf("round trip changed\n%+v\ninto\n%+v", fits, again)
		}
	})
}
