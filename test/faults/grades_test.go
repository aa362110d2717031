package faults_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/outcomes"
)

// A fits file whose fit carries a gate changes the grade on both faces,
// POST /v1/decide over HTTP and system1_decide from the built binary over
// stdio, and the answer names the gate that graded it; the same fit
// without a gate grades by the threshold.
func TestGradeByTheFitsGateOnBothFaces(t *testing.T) {
	const body = `{"question":"Which department should take this ticket?","options":["billing","technical"],"context":{"ticket":"I was charged twice."}}`
	fit := calibration.Fit{Model: fakeModel, Kind: decision.Choice, Bucket: "2", Temperature: 1, N: 200}
	withGate := fit
	withGate.Gate = &calibration.FitGate{Threshold: 0.8, TargetError: 0.02, On: calibration.GateOnHeldOut, N: 400, Above: 250, UpperBound: 0.012}
	for _, tc := range []struct {
		name  string
		fit   calibration.Fit
		grade string
		gate  gateway.GradeGate
	}{
		// 0.75 against the threshold 0.6: act.
		{"no gate", fit, gateway.GradeAct, gateway.GradeGate{Value: 0.6, Source: gateway.GateFromThreshold}},
		// 0.75 against the fit's 0.8: within 0.1 under it, ask.
		{"gate", withGate, gateway.GradeAsk, gateway.GradeGate{Value: 0.8, Source: gateway.GateFromFit, TargetError: 0.02}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "local", llamacpp, fakeengine.Behavior{Logprobs: fakeengine.Probs(0.75, 0.25)}, long)
			data, err := (&calibration.Fits{Version: calibration.FitsVersion, Created: "test", Fits: []calibration.Fit{tc.fit}}).Encode()
			if err != nil {
				t.Fatal(err)
			}
			fitsPath := filepath.Join(t.TempDir(), "fits.json")
			if err := os.WriteFile(fitsPath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			threshold := 0.6
			cfg := &config.Config{
				Nodes:   []config.Node{n.cfg},
				Gateway: config.Gateway{Threshold: &threshold, Fits: fitsPath, Timeout: config.Duration(long), Chain: []config.Link{{Name: "local", Model: fakeModel}}},
			}
			check := func(face string, raw []byte) {
				t.Helper()
				var res gateway.Response
				if err := json.Unmarshal(raw, &res); err != nil {
					t.Fatalf("%s: %v: %s", face, err, raw)
				}
				if res.Status != gateway.Decided || res.Confidence == nil || *res.Confidence != 0.75 || res.Grade != tc.grade || res.Gate == nil || *res.Gate != tc.gate {
					t.Errorf("%s: status %s confidence %v grade %q gate %+v; want decided at 0.75, %q, %+v\n%s", face, res.Status, res.Confidence, res.Grade, res.Gate, tc.grade, tc.gate, raw)
				}
			}
			file, err := outcomes.OpenFitsFile(fitsPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := serve(t, []*node{n}, nil, 4*long, func(r *fleet.Router) *gateway.Gateway {
				return gateway.New(gateway.Options{Config: cfg, Answer: answer.New(answer.Options{Router: r, Fits: file.Current}), Version: "faults"})
			})
			r := s.mustPost(t, "/v1/decide", body)
			if r.status != 200 {
				t.Fatalf("HTTP: %s", r)
			}
			check("HTTP", r.body)

			var args map[string]any
			if err := json.Unmarshal([]byte(body), &args); err != nil {
				t.Fatal(err)
			}
			raw, isError := startMCP(t, cfg).decide(t, args)
			if isError {
				t.Fatalf("MCP: an error: %s", raw)
			}
			check("MCP", raw)
		})
	}
}
