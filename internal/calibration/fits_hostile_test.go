package calibration

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"system1/internal/decision"
)

func fitsWith(fit string) string {
	return `{"version":1,"created":"x","fits":[` + fit + `]}`
}

func fitJSON(temperature string) string {
	return `{"provider":"p","model":"m","kind":"choice","bucket":"2","temperature":` + temperature +
		`,"n":1,"nll_before":0,"nll_after":0,"ece_before":0,"ece_after":0,"date":""}`
}

// Hostile fits files are refused, naming what is wrong; what is accepted
// tempers any distribution into a distribution.
func TestParseFitsHostile(t *testing.T) {
	good := fitJSON("1.5")
	for _, tc := range []struct{ name, data, want string }{
		{"NaN", fitsWith(fitJSON("NaN")), "invalid character"},
		{"NaN string", fitsWith(fitJSON(`"NaN"`)), "cannot unmarshal string"},
		{"Infinity", fitsWith(fitJSON("Infinity")), "invalid character"},
		{"negative", fitsWith(fitJSON("-1")), "temperature -1 is not a positive finite number"},
		{"zero", fitsWith(fitJSON("0")), "temperature 0 is not"},
		{"negative zero", fitsWith(fitJSON("-0")), "is not a positive"},
		{"over float64", fitsWith(fitJSON("1e309")), "cannot unmarshal number 1e309"},
		{"null", fitsWith(fitJSON("null")), "temperature 0 is not"},
		{"missing", fitsWith(`{"kind":"choice","bucket":"2"}`), "temperature 0 is not"},
		{"the same fit twice", fitsWith(good + "," + good), "fit 1 repeats fit 0"},
		{"a key twice", fitsWith(strings.Replace(good, `"temperature":1.5`, `"temperature":-1,"temperature":1.5`, 1)), `fit 0: key "temperature" appears twice`},
		{"a top key twice", `{"version":1,"version":1,"created":"x","fits":[]}`, `key "version" appears twice`},
		{"keys differing in case", fitsWith(strings.Replace(good, `"temperature":1.5`, `"temperature":1.5,"Temperature":-1`, 1)), `unknown field "Temperature"`},
		{"invalid UTF-8", fitsWith(strings.Replace(good, `"p"`, "\"p\xff\"", 1)), "not valid UTF-8"},
		{"fits not a list", `{"version":1,"created":"x","fits":{}}`, "cannot unmarshal object"},
		{"a fit not an object", fitsWith("1"), "cannot unmarshal number"},
		{"deep", `{"version":1,"created":"x","fits":[` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `]}`, "fits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFits([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFits = %+v, %v; want an error with %q", f, err, tc.want)
			}
		})
	}
	// The extremes that are accepted (positive and finite) still give a
	// distribution: no NaN, summing to 1.
	for _, temp := range []float64{math.SmallestNonzeroFloat64, 1e-300, 1e-9, 1e9, 1e300, math.MaxFloat64} {
		f, err := ParseFits([]byte(fitsWith(fitJSON(fmt.Sprint(temp)))))
		if err != nil {
			t.Fatalf("temperature %v: %v", temp, err)
		}
		for _, d := range []decision.Distribution{{0.7, 0.3}, {1e-300, 1 - 1e-300}, {0.5, 0.5}, {1, 0}} {
			out := d.Temper(f.Fits[0].Temperature)
			sum := 0.0
			for _, p := range out {
				if math.IsNaN(p) || p < 0 || p > 1 {
					t.Fatalf("T=%v on %v: %v", temp, d, out)
				}
				sum += p
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("T=%v on %v: %v sums to %v", temp, d, out, sum)
			}
		}
	}
}
