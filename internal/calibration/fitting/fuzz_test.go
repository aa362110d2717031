package fitting

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
)

// hostile decodes fuzz bytes into cases: the first byte picks the kind
// and option count, then each case takes a byte per option (some bytes
// stand for NaN, ±Inf, 0, a huge or a tiny number; the rest are weights,
// normalised only when the next byte is even) and a byte for the
// expected index and the request.
func hostile(data []byte) []calibration.Prediction {
	if len(data) == 0 {
		return nil
	}
	kinds := []decision.Kind{decision.Choice, decision.Noul, decision.Score, "rank"}
	kind := kinds[int(data[0])%len(kinds)]
	k := 2 + int(data[0]>>2)%5
	data = data[1:]
	var out []calibration.Prediction
	for len(data) >= k+2 && len(out) < 200 {
		d := make(decision.Distribution, k)
		var sum float64
		for i := range d {
			switch b := data[i]; b {
			case 255:
				d[i] = math.NaN()
			case 254:
				d[i] = math.Inf(1)
			case 253:
				d[i] = math.Inf(-1)
			case 252:
				d[i] = 1e300
			case 251:
				d[i] = 5e-324
			default:
				d[i] = float64(b % 200)
			}
			sum += d[i]
		}
		if data[k]%2 == 0 && sum > 0 && !math.IsInf(sum, 0) {
			for i := range d {
				d[i] /= sum
			}
		}
		e := data[k+1]
		out = append(out, calibration.Prediction{Kind: kind, Dist: d, Expected: int(e%8) - 1, Options: k, Request: fmt.Sprint(e >> 4)})
		data = data[k+2:]
	}
	return out
}

// finite reports whether every number is finite.
func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// Whatever the cases, the fitters and the selection never panic, and
// what they return is usable: a calibrator that passes Check, a map that
// passes Check, finite metrics, sets within the options.
func FuzzFitters(f *testing.F) {
	f.Add([]byte{0, 10, 20, 30, 40, 0, 1, 50, 1, 1, 2, 0, 2, 3, 3, 1, 0, 200, 5, 9, 0, 17})
	f.Add([]byte{4, 255, 0, 0, 0, 0, 1, 254, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{9, 252, 1, 1, 251, 0, 3, 5, 5, 5, 5, 0, 4, 0, 0, 0, 9, 0, 17, 100, 0, 0, 0, 0, 33})
	f.Add([]byte{8, 1, 0, 0, 2, 0, 0, 1, 0, 2, 0, 1, 0, 0, 2, 0, 1, 3, 0, 2, 0, 1, 4, 0, 2, 0, 1, 5, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		preds := hostile(data)
		var valid []calibration.Prediction
		for _, p := range preds {
			if p.Check() == nil {
				valid = append(valid, p)
			}
		}
		for _, m := range calibration.Methods() {
			c, err := FitMethod(m, preds)
			if err != nil {
				continue
			}
			if err := c.Check(); err != nil {
				t.Fatalf("%s fitted %+v: %v", m, c, err)
			}
			for _, p := range calibration.Calibrate(preds, c) {
				if p.Check() == nil && !finite(p.Dist...) {
					t.Fatalf("%s calibrated into %v", m, p.Dist)
				}
			}
		}
		if m, ok := mapOf(preds); ok {
			if err := m.Check(); err != nil {
				t.Fatalf("map %+v: %v", m, err)
			}
		}
		for _, method := range []string{calibration.ConformalLAC, calibration.ConformalAPS} {
			c, err := FitConformal(preds, method, 0.8)
			if err != nil {
				continue
			}
			for _, p := range preds {
				for _, i := range c.Set(p.Dist) {
					if i < 0 || i >= len(p.Dist) {
						t.Fatalf("set index %d of %d", i, len(p.Dist))
					}
				}
			}
			if s := c.Evaluate(preds); !finite(s.Coverage, s.MeanSize) || s.Coverage > 1 {
				t.Fatalf("evaluated %+v", s)
			}
		}
		var st Stats
		for _, p := range preds {
			st.Add(p)
		}
		if m := st.Metrics(); !finite(m.NLL, m.ECE, m.Brier, m.Accuracy) || m.N != len(valid) {
			t.Fatalf("stats measure %+v", m)
		}
		s, err := Select(valid, calibration.TemperatureCalibrator(1.5), SelectOptions{Folds: 2, Resamples: 20})
		if err != nil {
			return
		}
		if err := s.Calibrator.Check(); err != nil || !finite(s.Raw.NLL, s.Current.OutOfFold.NLL, s.Map.Gain.Mean) {
			t.Fatalf("selection %+v: %v", s, err)
		}
		if f, ok := s.AdoptedFit(0.05); ok {
			f.Model = "m"
			if err := (&calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{f}}).Validate(); err != nil {
				t.Fatalf("the adopted fit fails Validate: %v\n%+v", err, f)
			}
		}
	})
}

// Statistics read from hostile JSON (huge counts, short slices) never
// panic in Merge, Metrics, SuggestGate or a report.
func FuzzStatsJSON(f *testing.F) {
	var s Stats
	for _, p := range overconfident(20, 3, 1, 1) {
		s.Add(p)
	}
	good, _ := json.Marshal(s)
	f.Add(good)
	f.Add([]byte(`{"n": 9223372036854775807, "right": 9223372036854775807, "expected": [9223372036854775807]}`))
	f.Add([]byte(`{"n": 1, "bin_count": [], "expected": [1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Stats
		if json.Unmarshal(data, &s) != nil {
			return
		}
		m := s.Metrics()
		if len(m.Bins) != NumBins || !finite(m.ECE, m.Accuracy, m.Floor) {
			t.Fatalf("measured %+v", m)
		}
		s.SuggestGate(0.05)
		var into Stats
		_ = into.Merge(s)
		b := BucketStats{Calibrator: calibration.Identity(), Raw: s, Calibrated: s}
		b.Report("m", decision.Choice, "2", 0.05)
		p := calibration.Prediction{Kind: decision.Noul, Dist: decision.Distribution{.5, .5}, Options: 2}
		b.Raw.Add(p)
		b.Calibrated.Add(p)
	})
}
