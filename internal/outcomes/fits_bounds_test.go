package outcomes

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/decision"
)

func writeFit(t *testing.T, kind, bucket, method, temperature string) string {
	t.Helper()
	m := ""
	if method != "" {
		m = `"method":"` + method + `",`
	}
	data := `{"version":1,"created":"x","fits":[{"provider":"p","model":"m","kind":"` + kind + `","bucket":"` + bucket + `",` + m +
		`"temperature":` + temperature + `,"n":1,"nll_before":0,"nll_after":0,"ece_before":0,"ece_after":0,"date":""}]}`
	path := filepath.Join(t.TempDir(), "fits.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A temperature so large that tempering makes distinct probabilities
// equal would move the answer to the first option (Temper promises the
// argmax does not move): the file is refused, naming the temperature.
func TestLoadFitsRefusesATemperatureThatTies(t *testing.T) {
	for _, temp := range []string{"1e15", "1e300", "1.7976931348623157e308"} {
		_, err := LoadFits(writeFit(t, "choice", "2", "", temp))
		if err == nil || !strings.Contains(err.Error(), "fit 0: temperature ") {
			t.Errorf("temperature %s: err %v; want the temperature refused", temp, err)
		}
	}
	// The fitter's own range, and well beyond it, still loads.
	for _, temp := range []string{"0.05", "20", "1000", "1e-9"} {
		if _, err := LoadFits(writeFit(t, "choice", "2", "", temp)); err != nil {
			t.Errorf("temperature %s: %v", temp, err)
		}
	}
}

// A level fit keeps each score's expected level at any temperature the
// file may hold, a sharp one whose tempered probabilities underflow to
// zero included.
func TestLoadFitsLevelKeepsTheLevelAtASharpTemperature(t *testing.T) {
	for _, temp := range []string{"1e-6", "0.001", "0.05"} {
		f, err := LoadFits(writeFit(t, "score", "3-4", "level", temp))
		if err != nil {
			t.Fatal(err)
		}
		d := decision.Distribution{0.6, 0.1, 0.3}
		out, ok := f.Apply("p", "m", decision.Score, d)
		if !ok {
			t.Fatal("no fit found")
		}
		if got, want := decision.ExpectedLevel(out), decision.ExpectedLevel(d); math.Abs(got-want) > 1e-9 {
			t.Errorf("T=%s: %v has expected level %v; want %v as before", temp, out, got, want)
		}
	}
}
