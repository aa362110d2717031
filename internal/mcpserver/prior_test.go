package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
	"system1/internal/mcpserver"
)

// Over MCP, system1_decide takes prior as the decide body does (its input
// schema lists it): content_free makes one extra engine call over the
// empty context, names the step in calibration and divides the reading
// out; the server's configured batch applies once its minimum was seen
// (every answer counts toward it, the content-free one too);
// a bad value is the caller's error, naming the field.
func TestDecidePriorOverMCP(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Prompted: fakeengine.Leaning}})
	t.Cleanup(f.Close)
	yaml := fmt.Sprintf(noCanary+"prior: batch\nprior_min_requests: 2\ngateway:\n  threshold: 0\n  chain:\n    - {name: local, model: %s}\nnodes:\n  - {name: n, url: %s, dialect: llamacpp, models: [%s]}\n",
		fakeengine.DefaultModel, f.URL, fakeengine.DefaultModel)
	s := newWorld(t, yaml).start()
	for _, tool := range s.listTools() {
		if tool.Name != mcpserver.ToolDecide {
			continue
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil || !strings.Contains(string(schema), `"prior"`) {
			t.Errorf("the decide tool's input schema has no prior: %s", schema)
		}
	}
	args := func(prior string) map[string]any {
		a := map[string]any{"question": "Which?", "options": []string{"alpha", "beta", "gamma"}, "context": map[string]any{"note": "about beta"}}
		if prior != "" {
			a["prior"] = prior
		}
		return a
	}
	steps := func(res *gateway.Response) string {
		if res.Calibration == nil {
			return "<none>"
		}
		var out []string
		for _, st := range res.Calibration.Steps {
			out = append(out, st.Name+"="+st.Version)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name, prior, steps string
		calls              int
		beta               float64
	}{
		{"content_free", "content_free", "prior=content_free/empty_state", 2, 0.6},
		{"configured batch, not yet warm", "", "", 1, 3. / 8},
		{"configured batch, warm", "", "prior=batch/n=2/window=256", 1, 1. / 3},
		{"off", "off", "", 1, 3. / 8},
	} {
		f.Reset()
		res := s.decide(args(tc.prior))
		if res.Status != gateway.Decided || steps(res) != tc.steps {
			t.Fatalf("%s: %s, steps %q, want %q (%+v)", tc.name, res.Status, steps(res), tc.steps, res.Error)
		}
		if n := len(f.Inferences()); n != tc.calls {
			t.Errorf("%s: %d engine calls, want %d", tc.name, n, tc.calls)
		}
		if p, _ := res.Probabilities.Get("beta"); math.Abs(p-tc.beta) > 0.0011 {
			t.Errorf("%s: beta %v, want %v", tc.name, p, tc.beta)
		}
	}
	res := s.decide(map[string]any{"question": "Which?", "prior": "always"})
	if res.Error == nil || res.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(res.Error.Message, "prior must be") {
		t.Fatalf("a bad prior: %+v", res.Error)
	}
}
