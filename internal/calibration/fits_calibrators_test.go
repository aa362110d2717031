package calibration

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"system1/internal/decision"
)

// A fits file written before calibrators (testdata/fits-v1.json is
// docs/bench/tiny-fits.json as the first calibrate wrote it) still
// loads, applies its temperature, and is written back without a new
// field: a file of temperatures is what it always was.
func TestOldFitsFileLoads(t *testing.T) {
	data, err := os.ReadFile("testdata/fits-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFits(data)
	if err != nil {
		t.Fatal(err)
	}
	ft := f.Fits[0]
	if ft.Method != "" || ft.Biases != nil || ft.ConfidenceMap != nil || ft.Sets != nil {
		t.Errorf("an old fit grew new fields: %+v", ft)
	}
	if c := ft.Calibrator(); c.Method != MethodTemperature || c.Temperature != ft.Temperature {
		t.Errorf("calibrator %+v", c)
	}
	d := decision.Distribution{.7, .2, .1}
	got, ok := f.Apply("", "stories260k", decision.Choice, d)
	if want := d.Temper(ft.Temperature); !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	f.Revision = ""
	out, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, data) {
		t.Errorf("written back otherwise:\n%s\nwas\n%s", out, data)
	}
}

// A fit with a vector calibrator, a confidence map and prediction sets
// is written and read back whole, and applies its biases.
func TestFitsWithCalibratorsRoundTrip(t *testing.T) {
	ft := Fit{Model: "m", Kind: decision.Choice, Bucket: "3-4", N: 10,
		ConfidenceMap: &ConfidenceMap{X: []float64{0.3, 0.6, 0.9}, Y: []float64{0.2, 0.5, 0.97}},
		Sets: []Conformal{
			{Method: ConformalLAC, Coverage: 0.9, N: 10, Threshold: 0.8},
			{Method: ConformalAPS, Coverage: 0.9, N: 10, Threshold: 0.95},
		},
	}
	ft.SetCalibrator(Calibrator{Method: MethodVector, Temperature: 2, Biases: []float64{-1, 0.5, 0.25, 0.25}}.WithMap(ft.ConfidenceMap, ft.Kind))
	f := &Fits{Version: FitsVersion, Fits: []Fit{ft}}
	data, err := f.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"method": "vector"`, `"biases": [`, `"confidence_map": {`, `"sets": [`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("no %s in\n%s", key, data)
		}
	}
	back, err := ParseFits(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, f) {
		t.Errorf("read back\n%+v\nwrote\n%+v", back, f)
	}
	d := decision.Distribution{.25, .25, .25, .25}
	got, ok := back.Apply("", "m", decision.Choice, d)
	want := ft.Calibrator().Apply(d)
	if !ok || !reflect.DeepEqual(got, want) || !(got[0] < got[1]) {
		t.Errorf("applied %v, want %v with the first option pulled down", got, want)
	}
	if c := back.Fits[0].MapConfidence(0.75); math.Abs(c-0.735) > 1e-12 {
		t.Errorf("mapped 0.75 to %v, want 0.735", c)
	}
	if c := (Fit{}).MapConfidence(0.75); c != 0.75 {
		t.Errorf("without a map 0.75 became %v", c)
	}
	// MethodNone and MethodTemperature are written as the plain temperature.
	for _, c := range []Calibrator{Identity(), TemperatureCalibrator(1.5)} {
		var g Fit
		g.SetCalibrator(c)
		if g.Method != "" || g.Biases != nil || g.Temperature != c.Temperature {
			t.Errorf("%s written as %+v", c, g)
		}
	}
	if f, err := ParseFits([]byte(fitsWith(strings.TrimSuffix(fitJSON("1.5"), "}") + `,"sets":[]}`))); err != nil || f.Fits[0].Sets != nil {
		t.Errorf(`"sets": [] read as %+v, %v`, f, err)
	}
}

// Hostile calibrators, maps and sets are refused, naming the field.
func TestParseFitsRejectsBadCalibrators(t *testing.T) {
	with := func(fields string) string {
		return fitsWith(strings.TrimSuffix(fitJSON("1.5"), "}") + "," + fields + "}")
	}
	for _, tc := range []struct{ name, data, want string }{
		{"unknown method", with(`"method":"platt"`), `method "platt"`},
		{"biases without vector", with(`"biases":[1,2]`), "biases without method vector"},
		{"vector without biases", with(`"method":"vector"`), "0 biases"},
		{"an empty bias list", with(`"method":"vector","biases":[]`), "0 biases"},
		{"a huge bias", with(`"method":"vector","biases":[0,1e300]`), "bias 1 is 1e+300"},
		{"a bias as a string", with(`"method":"vector","biases":["1"]`), "cannot unmarshal"},
		{"too many biases", with(`"method":"vector","biases":[` + strings.Repeat("0,", 255) + `0]`), "256 biases"},
		{"a map without knots", with(`"confidence_map":{"x":[],"y":[]}`), "confidence_map: no knots"},
		{"a map of two lengths", with(`"confidence_map":{"x":[0.1,0.2],"y":[0.5]}`), "2 x for 1 y"},
		{"a map going back", with(`"confidence_map":{"x":[0.5,0.4],"y":[0.5,0.6]}`), "x 1 is 0.4"},
		{"a map going down", with(`"confidence_map":{"x":[0.4,0.5],"y":[0.6,0.5]}`), "y 1 is 0.5"},
		{"a map past 1", with(`"confidence_map":{"x":[0.4,1.5],"y":[0.5,0.6]}`), "x 1 is 1.5"},
		{"a map with an unknown key", with(`"confidence_map":{"x":[0.4],"y":[0.5],"z":1}`), `confidence_map: unknown field "z"`},
		{"a map key twice", with(`"confidence_map":{"x":[0.4],"y":[0.5],"y":[0.6]}`), `key "y" appears twice`},
		{"a set of an unknown method", with(`"sets":[{"method":"raps","coverage":0.9,"n":100,"threshold":0.5}]`), `set 0: method "raps"`},
		{"a set of too few", with(`"sets":[{"method":"lac","coverage":0.95,"n":10,"threshold":0.5}]`), "set 0: n 10 is under the 19"},
		{"a set of huge n", with(`"sets":[{"method":"lac","coverage":0.95,"n":1e30,"threshold":0.5}]`), "cannot unmarshal"},
		{"a set twice", with(`"sets":[{"method":"lac","coverage":0.9,"n":100,"threshold":0.5},{"method":"lac","coverage":0.9,"n":50,"threshold":0.6}]`), "set 1 repeats set 0"},
		{"a set with an unknown key", with(`"sets":[{"method":"lac","coverage":0.9,"n":100,"threshold":0.5,"alpha":0.1}]`), `set 0: unknown field "alpha"`},
		{"sets not a list", with(`"sets":{}`), "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFits([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFits = %+v, %v; want an error with %q", f, err, tc.want)
			}
		})
	}
}

// SetGate chooses the gate on the confidences the fit serves, its map
// applied, since those are what decide grades: every answer served at or
// above the gate keeps the error bound, and without a map it is the
// calibrator's gate.
func TestSetGateWithAMap(t *testing.T) {
	preds := overconfident(3000, 4, 3, 5)
	var f Fit
	f.Kind = decision.Choice
	f.SetCalibrator(TemperatureCalibrator(2))
	f.SetGate(preds, nil, 0.05)
	if f.Gate == nil {
		t.Fatal("no gate without a map")
	}
	if g := SuggestGate(Calibrate(preds, TemperatureCalibrator(2)), 0.05); g.Threshold == nil || *g.Threshold != f.Gate.Threshold {
		t.Errorf("gate %+v without a map, the calibrator's is %+v", f.Gate, g)
	}
	m, err := FitConfidenceMap(Calibrate(preds, f.Calibrator()))
	if err != nil {
		t.Fatal(err)
	}
	f.ConfidenceMap = &m
	// The map is flat over its steps, so a gate on what it serves is
	// coarser: at 5% none passes on these cases, at 10% one does.
	f.SetGate(preds, nil, 0.1)
	served := Calibrate(preds, f.Calibrator())
	if f.Gate == nil {
		t.Fatal("no gate with a map")
	}
	var above, wrong int
	for _, p := range served {
		if p.Confidence() >= f.Gate.Threshold {
			above++
			if !p.Correct() {
				wrong++
			}
		}
	}
	if above != f.Gate.Above || wrong != f.Gate.WrongAbove || f.Gate.UpperBound >= 0.1 {
		t.Errorf("gate %+v with a map; served at or above it: %d, %d wrong", f.Gate, above, wrong)
	}
}
