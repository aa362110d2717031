package gateway

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"system1/internal/fakeengine"
)

// Decide takes prior in the request and from the configuration: each
// answer's calibration names the steps applied, in order (debias, then
// prior), batch only once prior_min_requests answers of the question
// were seen; content_free costs one extra engine call, then comes from
// the cache; bad values are the caller's error, naming the field.
func TestDecidePrior(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Behavior: fakeengine.Behavior{Prompted: fakeengine.Leaning}})
	t.Cleanup(f.Close)
	yaml := func(extra string) string {
		return extra + fmt.Sprintf("gateway:\n  threshold: 0\nnodes:\n  - {name: n1, url: %s, dialect: llamacpp, models: [tiny]}\n"+
			"providers:\n  - {name: local, kind: engine, model: tiny}\n", f.URL)
	}
	const ask = `{"question":"Which?","options":["alpha","beta","gamma"],"context":{"note":"about beta"}`
	for _, tc := range []struct {
		name, config, field string
		// per request of a stream over one gateway: the steps named and the engine calls
		steps []string
		calls []int
		beta  float64 // the last answer's probability of beta
	}{
		{"off", "", "", []string{""}, []int{1}, 3. / 8},
		{"content_free in the request", "", `,"prior":"content_free"`, []string{"prior=content_free/empty_state", "prior=content_free/empty_state"}, []int{2, 1}, 0.6},
		{"content_free configured", "prior: content_free\n", "", []string{"prior=content_free/empty_state"}, []int{2}, 0.6},
		{"configured, off in the request", "prior: content_free\n", `,"prior":"off"`, []string{""}, []int{1}, 3. / 8},
		{"batch after its minimum", "prior: batch\nprior_min_requests: 2\nprior_window: 10\n", "", []string{"", "", "prior=batch/n=2/window=10"}, []int{1, 1, 1}, 1. / 3},
		{"debias then prior", "debias: permute\n", `,"prior":"content_free"`, []string{"debias=permute/3,prior=content_free/empty_state"}, []int{6}, (3./8 + 12./14 + 3./8) / 3},
	} {
		g := gatewayFor(t, yaml(tc.config))
		var last *Response
		for k, want := range tc.steps {
			f.Reset()
			last = decide(t, g, ask+tc.field+`}`)
			var got []string
			for _, st := range last.Calibration.Steps {
				got = append(got, st.Name+"="+st.Version)
			}
			if strings.Join(got, ",") != want {
				t.Errorf("%s, request %d: steps %v, want %q", tc.name, k, got, want)
			}
			if n := len(f.Inferences()); n != tc.calls[k] {
				t.Errorf("%s, request %d: %d engine calls, want %d", tc.name, k, n, tc.calls[k])
			}
		}
		if p, _ := last.Probabilities.Get("beta"); math.Abs(p-tc.beta) > 0.0011 {
			t.Errorf("%s: beta %v, want %v", tc.name, p, tc.beta)
		}
	}
	g := gatewayFor(t, yaml(""))
	for _, bad := range []string{`"sometimes"`, `""`, `3`, `"BATCH"`} {
		res := decide(t, g, `{"question":"Which?","prior":`+bad+`}`)
		if res.Error == nil || res.Error.Code != CodeInvalidRequest || res.Error.Message != `prior must be "batch", "content_free" or "off"` {
			t.Errorf("prior %s: %+v", bad, res.Error)
		}
	}
}
