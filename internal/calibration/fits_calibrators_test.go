package calibration

import (
	"bytes"
	"math"
	"os"
	"reflect"
	"slices"
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
		{"a set's calibrator with an unknown key", with(`"sets":[{"method":"lac","coverage":0.9,"n":100,"threshold":0.5,"calibrator":{"method":"temperature","temperature":1,"alpha":1}}]`), `set 0: calibrator: unknown field "alpha"`},
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

// A set's holdout is read back as written, and a key in it that is not
// one of SetCoverage's is refused, naming it.
func TestFitsSetHoldoutKeys(t *testing.T) {
	set := `{"method":"lac","coverage":0.9,"n":10,"threshold":0.8,"holdout":{"n":10,"covered":9,"coverage":0.9,"mean_size":1.2,"empty":0,"singletons":8}}`
	f, err := ParseFits([]byte(fitsWith(strings.TrimSuffix(fitJSON("1.5"), "}") + `,"sets":[` + set + `]}`)))
	if err != nil || f.Fits[0].Sets[0].Holdout == nil || f.Fits[0].Sets[0].Holdout.Singletons != 8 {
		t.Fatalf("%+v %v", f, err)
	}
	bad := strings.Replace(set, `"empty":0`, `"Empty":0`, 1)
	if _, err := ParseFits([]byte(fitsWith(strings.TrimSuffix(fitJSON("1.5"), "}") + `,"sets":[` + bad + `]}`))); err == nil || !strings.Contains(err.Error(), `"Empty"`) {
		t.Errorf("an unknown holdout key: %v", err)
	}
	nest := strings.Replace(set, `"covered":9`, `"covered":11`, 1)
	if _, err := ParseFits([]byte(fitsWith(strings.TrimSuffix(fitJSON("1.5"), "}") + `,"sets":[` + nest + `]}`))); err == nil {
		t.Error("a holdout covering more cases than it has was taken")
	}
}

// A set's own calibrator is read back as written and applied before the
// threshold (SetOf); one of an unknown key, a map, or no method is
// refused, naming it.
func TestFitsSetCalibrator(t *testing.T) {
	with := func(cal string) string {
		set := `{"method":"lac","coverage":0.9,"n":10,"threshold":0.5,"calibrator":` + cal + `}`
		return fitsWith(strings.TrimSuffix(fitJSON("1.5"), "}") + `,"sets":[` + set + `]}`)
	}
	f, err := ParseFits([]byte(with(`{"method":"vector","temperature":1,"biases":[-3,0]}`)))
	if err != nil {
		t.Fatal(err)
	}
	rule := f.Fits[0].Sets[0]
	// 0.6 and 0.4 as they came: under a pull of 3 nats from the first,
	// the second alone clears p >= 0.5.
	d := decision.Distribution{0.6, 0.4}
	if got, raw := rule.SetOf(d), rule.Set(d); !slices.Equal(got, []int{1}) || !slices.Equal(raw, []int{0}) {
		t.Errorf("SetOf %v, Set %v", got, raw)
	}
	for _, tc := range []struct{ cal, want string }{
		{`{"method":"vector","temperature":1,"biases":[0,0],"alpha":1}`, `unknown field "alpha"`},
		{`{"method":"none","temperature":1}`, "a set's calibrator"},
		{`{"method":"temperature","temperature":2,"map":{"x":[0.5],"y":[0.5]}}`, "a set's calibrator"},
		{`{"method":"temperature","temperature":-2}`, "calibrator: temperature -2"},
	} {
		if _, err := ParseFits([]byte(with(tc.cal))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.cal, err, tc.want)
		}
	}
}

// A level fit of a choice is refused: MethodLevel keeps a score's
// expected level, which a choice has none of.
func TestLevelFitOfAChoiceRefused(t *testing.T) {
	f := Fit{Kind: decision.Choice, Bucket: "11-20", Temperature: 2, Method: MethodLevel}
	if err := f.validate(); err == nil {
		t.Error("a level fit of a choice validated")
	}
}

// MapConfidence is the probability right of an answer whose calibrated
// confidence is c, by f's confidence map; c itself without one. Only the
// tests read a map this way: served answers go through Fit.Apply.
func (f Fit) MapConfidence(c float64) float64 {
	if f.ConfidenceMap == nil {
		return c
	}
	return f.ConfidenceMap.Map(c)
}
