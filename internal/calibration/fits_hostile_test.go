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
	for _, temp := range []float64{math.SmallestNonzeroFloat64, 1e-300, 1e-9, 1e3} {
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

func fitWithGate(gate string) string {
	return fitsWith(`{"provider":"p","model":"m","kind":"choice","bucket":"2","temperature":1.5,"n":1,"nll_before":0,"nll_after":0,"ece_before":0,"ece_after":0,` +
		`"gate":` + gate + `,"date":""}`)
}

func gateJSON(threshold string) string {
	return `{"threshold":` + threshold + `,"target_error":0.02,"on":"held_out","n":400,"above":300,"wrong_above":1,"upper_bound":0.016}`
}

// A fit's gate must be a probability a confidence can reach, in (0, 1],
// with counts that nest; a file without gates (written before them)
// loads with none, and a null gate is none.
func TestParseFitsGates(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"zero", fitWithGate(gateJSON("0")), "gate: threshold 0 is not in (0, 1]"},
		{"negative", fitWithGate(gateJSON("-0.5")), "gate: threshold -0.5 is not in (0, 1]"},
		{"over 1", fitWithGate(gateJSON("1.0000001")), "gate: threshold 1.0000001 is not in (0, 1]"},
		{"NaN", fitWithGate(gateJSON("NaN")), "invalid character"},
		{"Infinity", fitWithGate(gateJSON("1e309")), "cannot unmarshal number 1e309"},
		{"missing threshold", fitWithGate(`{"target_error":0.02,"on":"held_out","n":1,"above":1,"wrong_above":0,"upper_bound":0.9}`), "threshold 0 is not in (0, 1]"},
		{"target 0", fitWithGate(strings.Replace(gateJSON("0.9"), `"target_error":0.02`, `"target_error":0`, 1)), "target_error 0 is not in (0, 1)"},
		{"on nothing", fitWithGate(strings.Replace(gateJSON("0.9"), `"held_out"`, `"everything"`, 1)), `on "everything" is not held_out or fitted`},
		{"above over n", fitWithGate(strings.Replace(gateJSON("0.9"), `"above":300`, `"above":500`, 1)), "do not nest"},
		{"wrong over above", fitWithGate(strings.Replace(gateJSON("0.9"), `"wrong_above":1`, `"wrong_above":301`, 1)), "do not nest"},
		{"bound over 1", fitWithGate(strings.Replace(gateJSON("0.9"), `"upper_bound":0.016`, `"upper_bound":2`, 1)), "upper_bound 2 is not in [0, 1]"},
		{"unknown key", fitWithGate(strings.Replace(gateJSON("0.9"), `"on"`, `"On"`, 1)), `gate: unknown field "On"`},
		{"a key twice", fitWithGate(strings.Replace(gateJSON("0.9"), `"threshold":0.9`, `"threshold":0.9,"threshold":2`, 1)), `gate: key "threshold" appears twice`},
		{"not an object", fitWithGate(`0.9`), "cannot unmarshal number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFits([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFits = %+v, %v; want an error with %q", f, err, tc.want)
			}
		})
	}
	for _, th := range []string{"1", "0.5", "1e-300"} {
		f, err := ParseFits([]byte(fitWithGate(gateJSON(th))))
		if err != nil || f.Fits[0].Gate == nil || fmt.Sprint(f.Fits[0].Gate.Threshold) != fmt.Sprint(mustFloat(t, th)) {
			t.Errorf("gate %s: %+v, %v", th, f, err)
		}
	}
	for _, data := range []string{fitsWith(fitJSON("1.5")), fitWithGate("null")} {
		f, err := ParseFits([]byte(data))
		if err != nil || f.Fits[0].Gate != nil {
			t.Errorf("%s: %+v, %v; want a fit without a gate", data, f, err)
		}
		b, err := f.Encode()
		if err != nil || strings.Contains(string(b), `"gate"`) {
			t.Errorf("a fit without a gate encodes as %s (%v)", b, err)
		}
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
