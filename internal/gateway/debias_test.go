package gateway

import (
	"fmt"
	"math"
	"testing"

	"system1/internal/fakeengine"
)

// Decide takes debias in the request and from the configuration: a
// permuted answer names the step and its orders in calibration, is the
// same for options given in a shifted order, and off names no step.
func TestDecideDebias(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Prompted: fakeengine.FirstBiased}})
	t.Cleanup(f.Close)
	for _, tc := range []struct {
		config, field, version string
		calls                  int
	}{
		{"", "", "", 1},
		{"", `,"debias":"permute"`, "permute/3", 3},
		{"debias: permute\ndebias_orders: 2\n", "", "permute/2", 2},
		{"debias: permute\n", `,"debias":"off"`, "", 1},
	} {
		g := gatewayFor(t, tc.config+fmt.Sprintf("gateway:\n  threshold: 0\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\n"+
			"providers:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
		f.Reset()
		a := decide(t, g, `{"question":"Which?","options":["alpha","beta","gamma"]`+tc.field+`}`)
		if got := len(f.Inferences()); got != tc.calls {
			t.Errorf("%q %q: %d engine calls, want %d", tc.config, tc.field, got, tc.calls)
		}
		b := decide(t, g, `{"question":"Which?","options":["gamma","alpha","beta"]`+tc.field+`}`)
		for _, r := range []*Response{a, b} {
			steps := r.Calibration.Steps
			switch {
			case tc.version == "" && len(steps) != 0:
				t.Errorf("%q %q: steps %+v, want none", tc.config, tc.field, steps)
			case tc.version != "" && (len(steps) != 1 || steps[0] != CalibrationStep{Name: "debias", Version: tc.version}):
				t.Errorf("%q %q: steps %+v, want debias %s", tc.config, tc.field, steps, tc.version)
			}
		}
		worst := 0.0
		for _, p := range a.Probabilities {
			q, _ := b.Probabilities.Get(p.Option)
			worst = max(worst, math.Abs(p.P-q))
		}
		if tc.version == "permute/3" && worst > 0.0011 {
			t.Errorf("every shift asked, yet shifted options differ by %v: %v vs %v", worst, a.Probabilities, b.Probabilities)
		}
		if tc.version == "" && worst < 0.1 {
			t.Errorf("no debiasing, yet shifted options agree: %v vs %v", a.Probabilities, b.Probabilities)
		}
	}
	g := gatewayFor(t, fmt.Sprintf("nodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\nproviders:\n  - {name: local, kind: engine, model: tiny}\n", f.URL))
	for _, bad := range []string{`"sometimes"`, `""`, `3`} {
		res := decide(t, g, `{"question":"Which?","debias":`+bad+`}`)
		if res.Error == nil || res.Error.Code != CodeInvalidRequest || res.Error.Message != `debias must be "permute" or "off"` {
			t.Errorf("debias %s: %+v", bad, res.Error)
		}
	}
}
