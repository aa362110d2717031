package fitting

import (
	"math"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// A level-keeping temperature sharpens or flattens a score's
// distribution and leaves its expected level, so its answer, accuracy
// and MAE, exactly as they were; a zero stays zero. That holds down to
// MinTemperature, where keeping the level takes a tilt of more than 60
// nats a level.
func TestLevelKeepsTheExpectedLevel(t *testing.T) {
	for _, d := range []decision.Distribution{
		{0.025, 0.025, 0.9, 0.025, 0.025},
		{0.9, 0.025, 0.025, 0.025, 0.025},
		{0.1, 0.2, 0, 0.3, 0.4},
		{0.5, 0.5},
		{0, 0, 1, 0},
		{0.99, 0.01},
		{0.98, 0.01, 0.01},
	} {
		for _, temp := range []float64{MinTemperature, 0.1, 0.3, 1, 4, 20} {
			out := calibration.Calibrator{Method: calibration.MethodLevel, Temperature: temp}.Apply(d)
			if err := out.Check(len(d)); err != nil {
				t.Fatalf("%v at T=%v: %v", d, temp, err)
			}
			if a, b := decision.ExpectedLevel(out), decision.ExpectedLevel(d); math.Abs(a-b) > 1e-9 {
				t.Errorf("%v at T=%v: expected level %v, was %v (%v)", d, temp, a, b, out)
			}
			for i := range d {
				if (d[i] == 0) != (out[i] == 0) {
					t.Errorf("%v at T=%v: %v", d, temp, out)
				}
			}
		}
	}
	flat := calibration.Calibrator{Method: calibration.MethodLevel, Temperature: 5}.Apply(decision.Distribution{0.025, 0.025, 0.9, 0.025, 0.025})
	if !(flat[2] < 0.5) {
		t.Errorf("T=5 did not flatten: %v", flat)
	}
}

// On scores a plain temperature would buy likelihood with accuracy, the
// level-keeping one is adopted: NLL falls, and accuracy and MAE stay
// exactly. (The plain temperature is refused for the accuracy it costs.)
func TestSelectAdoptsALevelKeepingTemperature(t *testing.T) {
	preds := scoreMix(600, 0.2, 0.6, 9)
	s, err := Select(preds, calibration.Identity(), SelectOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Adopt || s.Calibrator.Method != calibration.MethodLevel {
		t.Fatalf("adopted %s: %s", s.Calibrator, s.Reason)
	}
	raw, cal := Measure(preds), Measure(calibration.Calibrate(preds, s.Calibrator))
	t.Logf("%s: NLL %.4f -> %.4f, ECE %.4f -> %.4f, accuracy %.4f -> %.4f, MAE %.4f -> %.4f", s.Calibrator, raw.NLL, cal.NLL, raw.ECE, cal.ECE, raw.Accuracy, cal.Accuracy, *raw.MAE, *cal.MAE)
	if !(cal.NLL < raw.NLL) || cal.Accuracy != raw.Accuracy || math.Abs(*cal.MAE-*raw.MAE) > 1e-9 {
		t.Errorf("NLL %v -> %v, accuracy %v -> %v, MAE %v -> %v", raw.NLL, cal.NLL, raw.Accuracy, cal.Accuracy, *raw.MAE, *cal.MAE)
	}
	for _, c := range s.Candidates {
		if c.Method == calibration.MethodTemperature && c.Refused == "" {
			t.Errorf("the plain temperature was not refused: %+v", c)
		}
	}
	// Not a score: never a candidate, and refused by name.
	ch, err := Select(banking12Like(300, 7, 2), calibration.Identity(), SelectOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ch.Candidates {
		if c.Method == calibration.MethodLevel {
			t.Errorf("a level candidate for a choice: %+v", c)
		}
	}
	if _, err := FitLevel(banking12Like(10, 7, 2)); err == nil {
		t.Error("FitLevel fitted choices")
	}
}
