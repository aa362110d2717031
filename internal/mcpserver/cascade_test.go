package mcpserver_test

import (
	"fmt"
	"slices"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/gateway"
)

// A cascade over MCP: system1_decide names the stage that answered and
// every stage asked, and capabilities list the cascade with its stages.
// With no fits, no stage is certified: uncertified: escalate asks the
// second stage, uncertified: keep keeps the first stage's answer.
func TestCascadeOverMCP(t *testing.T) {
	small := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"small"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.8, 0.1, 0.1)}})
	t.Cleanup(small.Close)
	large := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"large"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.1, 0.85, 0.05)}})
	t.Cleanup(large.Close)
	for _, tt := range []struct {
		uncertified, decision, stage string
		stages                       []string
	}{
		{"escalate", "support", "large", []string{"small", "large"}},
		{"keep", "billing", "small", []string{"small"}},
	} {
		t.Run(tt.uncertified, func(t *testing.T) {
			w := newWorld(t, fmt.Sprintf(`%snodes:
  - {name: ns, url: %q, dialect: llamacpp, models: [small]}
  - {name: nl, url: %q, dialect: llamacpp, models: [large]}
cascades:
  - {model: casc, stages: [small, large], target_error: 0.05, uncertified: %s}
gateway:
  threshold: 0
  chain:
    - {name: local, model: casc}
`, noCanary, small.URL, large.URL, tt.uncertified))
			s := w.start()
			defer s.close()
			res := s.decide(map[string]any{"question": "Which queue?", "options": []string{"billing", "support", "sales"}})
			if res.Status != gateway.Decided || str(res.Decision) != tt.decision || res.Served == nil || res.Served.Stage != tt.stage || !slices.Equal(res.Served.Stages, tt.stages) {
				t.Fatalf("response %+v, served %+v", res, res.Served)
			}
			caps := s.capabilities()
			i := slices.IndexFunc(caps.Models, func(m gateway.ModelInfo) bool { return m.Model == "casc" })
			if i < 0 || !slices.Equal(caps.Models[i].Stages, []string{"small", "large"}) {
				t.Fatalf("capabilities' models %+v", caps.Models)
			}
		})
	}
}
