package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// The shadow's counts and the drift gauges are exposed under their
// names; a second SetDrift replaces the first's series.
func TestShadowAndDriftExposition(t *testing.T) {
	m := New()
	m.WatchShadow(func() ShadowCounts { return ShadowCounts{Sampled: 10, Dropped: 3, Failed: 1, Asked: 5, Queued: 1} })
	m.SetDrift([]Drift{{Model: "m", Signature: "choice/4/abc", PSI: 0.5, Alarm: true}, {Model: "m", Signature: "noul/2/def", PSI: 0.01}})
	m.SetDrift([]Drift{{Model: "m", Signature: "choice/4/abc", PSI: 0.4, Alarm: true}})
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	for _, want := range []string{
		`system1_shadow_requests_total{outcome="sampled"} 10`,
		`system1_shadow_requests_total{outcome="dropped"} 3`,
		`system1_shadow_requests_total{outcome="failed"} 1`,
		`system1_shadow_requests_total{outcome="asked"} 5`,
		`system1_shadow_queue_depth 1`,
		`system1_answer_drift_psi{model="m",signature="choice/4/abc"} 0.4`,
		`system1_answer_drift_alarm{model="m",signature="choice/4/abc"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(string(body), `noul/2/def`) {
		t.Error("a signature the last SetDrift left out is still exposed")
	}
}
