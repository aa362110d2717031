package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fakeengine"
)

// Decide grades every answer against the gate (the threshold, until a
// calibration report suggests one): act when the confidence clears it and
// the runner-up is not close, ask near the gate or with a close second,
// escalate under it.
func TestDecideGrade(t *testing.T) {
	for _, tc := range []struct {
		threshold float64
		probs     []float64
		grade     string
	}{
		{0.6, []float64{0.8, 0.15, 0.05}, GradeAct},
		{0.6, []float64{0.55, 0.25, 0.2}, GradeAsk},      // under the gate by less than AskBand
		{0.6, []float64{0.45, 0.35, 0.2}, GradeEscalate}, // under it by more
		{0.3, []float64{0.45, 0.4, 0.15}, GradeAsk},      // over it, with a close second
		{0.3, []float64{0.6, 0.3, 0.1}, GradeAct},
		{0.8, []float64{0.7, 0.2, 0.1}, GradeAsk}, // under the gate by exactly AskBand: at most
		{0.5, []float64{0.55, 0.45}, GradeAsk},    // the runner-up exactly AskMargin behind: within it
		{0.5, []float64{0.56, 0.44}, GradeAct},    // more than AskMargin behind
		{0.8, []float64{0.699, 0.2, 0.101}, GradeEscalate},
	} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(tc.probs...)}})
		t.Cleanup(f.Close)
		g := gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: %v\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", tc.threshold, f.URL))
		res := decide(t, g, `{"question":"Which?","options":["a","b","c"]}`)
		if res.Grade != tc.grade {
			t.Errorf("threshold %v, %v: grade %q, want %q (%s)", tc.threshold, tc.probs, res.Grade, tc.grade, res.Rationale)
		}
	}
	// An abstention because no option fit is escalated whatever its confidence.
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.05, 0.01, 0.9)}})
	t.Cleanup(f.Close)
	g := gatewayFor(t, fmt.Sprintf("nodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
	if res := decide(t, g, `{"question":"Which?","options":["a","b"],"none_option":true}`); res.Status != Abstained || res.Grade != GradeEscalate {
		t.Errorf("none won: status %s, grade %q", res.Status, res.Grade)
	}
	if res := decide(t, g, `{"question":"Which?","options":["a","b"],"min_label_mass":0.5}`); res.Status != Abstained || res.Grade != GradeEscalate {
		t.Errorf("label mass under the minimum: status %s, grade %q", res.Status, res.Grade)
	}
	// The implicit option is a runner-up like any: a decision it follows
	// closely is not clearly ahead.
	f = fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.5, 0.05, 0.45)}})
	t.Cleanup(f.Close)
	g = gatewayFor(t, fmt.Sprintf("gateway:\n  threshold: 0.5\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
	if res := decide(t, g, `{"question":"Which?","options":["a","b"],"none_option":true}`); res.Status != Decided || res.Grade != GradeAsk {
		t.Errorf("none a close runner-up: status %s, grade %q (%s)", res.Status, res.Grade, res.Rationale)
	}
	if res := decide(t, g, `{"question":""}`); res.Grade != "" {
		t.Errorf("an error is graded %q", res.Grade)
	}
}

// The grade's bounds hold as docs/debiasing.md writes them on the
// confidences' grid of thousandths, whatever the float error of a
// difference of two decimals (0.8-0.1 is 0.7000000000000001): under the
// gate by at most AskBand is ask, a runner-up within AskMargin is ask, and
// act needs it more than AskMargin behind.
func TestGradeBounds(t *testing.T) {
	for _, tc := range []struct {
		conf, second, gate float64
		want               string
	}{
		{0.7, 0.2, 0.8, GradeAsk},
		{0.5, 0.3, 0.6, GradeAsk},
		{0.8, 0.1, 0.9, GradeAsk},
		{0.699, 0.2, 0.8, GradeEscalate},
		{0.55, 0.45, 0.5, GradeAsk},
		{0.7, 0.6, 0.5, GradeAsk},
		{0.65, 0.55, 0.3, GradeAsk},
		{0.8, 0.7, 0.5, GradeAsk},
		{0.551, 0.45, 0.5, GradeAct},
		{0.8, 0.2, 0.8, GradeAct},
	} {
		if got, why := grade(tc.conf, tc.second, tc.gate); got != tc.want {
			t.Errorf("confidence %v, runner-up %v, gate %v: %s (%s); want %s", tc.conf, tc.second, tc.gate, got, why, tc.want)
		}
	}
}

// writeFits writes fits as a fits file in a new folder and returns its
// path.
func writeFits(t *testing.T, fits ...calibration.Fit) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fits.json")
	data, err := (&calibration.Fits{Version: calibration.FitsVersion, Created: "test", Fits: fits}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func gated(fit calibration.Fit, threshold float64) calibration.Fit {
	fit.Gate = &calibration.FitGate{Threshold: threshold, TargetError: 0.02, On: calibration.GateOnHeldOut, N: 400, Above: 300, UpperBound: 0.01}
	return fit
}

// The gate of an answer is the one suggested with the fit the
// temperature step finds for its provider, model, kind and option count
// (by the same Lookup), when that fit has one; else the threshold. A
// fit without a gate (files written before gates, too few outcomes)
// grades by the threshold.
func TestGateLookup(t *testing.T) {
	fit := func(provider, model string, kind decision.Kind, bucket string) calibration.Fit {
		return calibration.Fit{Provider: provider, Model: model, Kind: kind, Bucket: bucket, Temperature: 1.2, N: 100}
	}
	path := writeFits(t,
		gated(fit("", "qwen", decision.Choice, "3-4"), 0.71),
		gated(fit("local", "qwen", decision.Choice, "3-4"), 0.82), // the provider's own fit wins
		fit("", "qwen", decision.Choice, "2"),                     // no gate
		gated(fit("", "qwen", decision.Noul, "2"), 0.93),
		gated(fit("", "other", decision.Choice, "5-10"), 1),
	)
	g := gatewayFor(t, "gateway:\n  fits: "+path+"\nproviders:\n  - {name: jev, kind: systemone, url: http://127.0.0.1:1, model: qwen}\n")
	if errs := g.ConfigErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		name, provider, model string
		kind                  decision.Kind
		n                     int
		want                  GradeGate
	}{
		{"model's fit", "jev", "qwen", decision.Choice, 3, GradeGate{Value: 0.71, Source: GateFromFit, TargetError: 0.02}},
		{"four options, same bucket", "jev", "qwen", decision.Choice, 4, GradeGate{Value: 0.71, Source: GateFromFit, TargetError: 0.02}},
		{"provider's fit", "local", "qwen", decision.Choice, 3, GradeGate{Value: 0.82, Source: GateFromFit, TargetError: 0.02}},
		{"fit without a gate", "jev", "qwen", decision.Choice, 2, GradeGate{Value: 0.6, Source: GateFromThreshold}},
		{"noul", "jev", "qwen", decision.Noul, 2, GradeGate{Value: 0.93, Source: GateFromFit, TargetError: 0.02}},
		{"gate of 1", "jev", "other", decision.Choice, 7, GradeGate{Value: 1, Source: GateFromFit, TargetError: 0.02}},
		{"no fit for the bucket", "jev", "qwen", decision.Choice, 5, GradeGate{Value: 0.6, Source: GateFromThreshold}},
		{"no fit for the kind", "jev", "qwen", decision.Score, 5, GradeGate{Value: 0.6, Source: GateFromThreshold}},
		{"no fit for the model", "jev", "llama", decision.Choice, 3, GradeGate{Value: 0.6, Source: GateFromThreshold}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gradeGate(g.fits(), tc.provider, tc.model, "", tc.kind, tc.n, 0.6); got != tc.want {
				t.Errorf("gate = %+v, want %+v", got, tc.want)
			}
		})
	}
	// Capabilities list each fit's gate, or none.
	caps := g.Capabilities(context.Background()).Calibration.Fits
	if len(caps) != 5 || caps[0].Gate == nil || *caps[0].Gate != 0.71 || caps[2].Gate != nil || caps[4].Gate == nil || *caps[4].Gate != 1 {
		t.Errorf("capabilities' fits: %+v", caps)
	}
	// Without a fits file every gate is the threshold.
	plain := gatewayFor(t, "providers:\n  - {name: jev, kind: systemone, url: http://127.0.0.1:1, model: qwen}\n")
	if got := gradeGate(plain.fits(), "jev", "qwen", "", decision.Choice, 3, 0.45); got != (GradeGate{Value: 0.45, Source: GateFromThreshold}) {
		t.Errorf("without fits: %+v", got)
	}
}

// Over a real engine node, a fit with a gate grades the answer against
// that gate, and the answer names it; the same fit without one grades by
// the threshold. The decision itself stays the threshold's: an answer
// under the threshold is never act, whatever its gate.
func TestDecideGradeByFitGate(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.75, 0.25)}})
	t.Cleanup(f.Close)
	fit := calibration.Fit{Model: "tiny", Kind: decision.Choice, Bucket: "2", Temperature: 1, N: 100}
	for _, tc := range []struct {
		name      string
		fit       calibration.Fit
		threshold float64
		status    string
		grade     string
		gate      GradeGate
	}{
		{"threshold", fit, 0.6, Decided, GradeAct, GradeGate{Value: 0.6, Source: GateFromThreshold}},
		{"a higher gate", gated(fit, 0.8), 0.6, Decided, GradeAsk, GradeGate{Value: 0.8, Source: GateFromFit, TargetError: 0.02}},
		{"a much higher gate", gated(fit, 0.9), 0.6, Decided, GradeEscalate, GradeGate{Value: 0.9, Source: GateFromFit, TargetError: 0.02}},
		{"threshold over the answer", fit, 0.9, Abstained, GradeEscalate, GradeGate{Value: 0.9, Source: GateFromThreshold}},
		{"a lower gate under a higher threshold", gated(fit, 0.7), 0.9, Abstained, GradeAsk, GradeGate{Value: 0.7, Source: GateFromFit, TargetError: 0.02}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gatewayFor(t, fmt.Sprintf("gateway:\n  fits: %s\n  threshold: %v\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n",
				writeFits(t, tc.fit), tc.threshold, f.URL))
			res := decide(t, g, `{"question":"Which?","options":["a","b"]}`)
			if res.Status != tc.status || res.Grade != tc.grade || res.Gate == nil || *res.Gate != tc.gate || *res.Confidence != 0.75 {
				t.Errorf("status %s grade %q gate %+v confidence %v; want %s, %q, %+v (%s)", res.Status, res.Grade, res.Gate, *res.Confidence, tc.status, tc.grade, tc.gate, res.Rationale)
			}
		})
	}
}

// Capabilities list each fit with the build it was learnt on and the
// calibrator it applies, as the answer path applies it: two builds' fits
// of one model, a vector fit and a refit's fit of no calibration (kept
// for its prediction sets) read apart, where every fit was listed as a
// temperature, p_i^(1/T), without its build.
func TestCapabilitiesNameEachFitsBuildAndCalibrator(t *testing.T) {
	fit := func(fingerprint string, c calibration.Calibrator) calibration.Fit {
		f := calibration.Fit{Model: "qwen", Fingerprint: fingerprint, Kind: decision.Choice, Bucket: "3-4", N: 100}
		f.SetCalibrator(c)
		return f
	}
	path := writeFits(t,
		fit("a1b2", calibration.TemperatureCalibrator(1.2)),
		fit("c3d4", calibration.Calibrator{Method: calibration.MethodVector, Temperature: 1.2, Biases: []float64{0.5, -0.5, 0}}),
		fit("e5f6", calibration.Identity()),
	)
	g := gatewayFor(t, "gateway:\n  fits: "+path+"\nproviders:\n  - {name: jev, kind: systemone, url: http://127.0.0.1:1, model: qwen}\n")
	data, err := json.Marshal(g.Capabilities(context.Background()).Calibration.Fits)
	if err != nil {
		t.Fatal(err)
	}
	var fits []struct{ Fingerprint, Calibrator string }
	if err := json.Unmarshal(data, &fits); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fits {
		got = append(got, f.Fingerprint+" "+f.Calibrator)
	}
	if want := []string{"a1b2 T=1.2", "c3d4 T=1.2/b=+0.5,-0.5,0", "e5f6 none"}; strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("capabilities' fits %q; want %q (%s)", got, want, data)
	}
}
