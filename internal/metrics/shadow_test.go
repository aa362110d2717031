package metrics

import (
	"fmt"
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

// The rolling ECE and drift gauges are replaced whole: a scrape while
// they are set again finds every series of one set, never a few or none,
// as a vector's Reset and then Sets let it; points with the same labels
// keep the last, as a vector's Set does.
func TestGaugesAreSetWhole(t *testing.T) {
	m := New()
	eces := []ECE{{"m", "choice", "2", 0.1}, {"m", "choice", "3-4", 0.2}, {"m", "noul", "2", 0.3}, {"n", "choice", "2", 0.4}}
	drifts := []Drift{{"m", "choice/4/abc", 0.5, true}, {"m", "noul/2/def", 0.01, false}, {"n", "score/3/123", 0.2, false}}
	m.SetECE(eces)
	m.SetDrift(drifts)
	count := func() map[string]int {
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, mf := range mfs {
			n[mf.GetName()] = len(mf.GetMetric())
		}
		return n
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			m.SetECE(eces)
			m.SetDrift(drifts)
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		n := count()
		if n["system1_calibration_ece"] != len(eces) || n["system1_answer_drift_psi"] != len(drifts) || n["system1_answer_drift_alarm"] != len(drifts) {
			t.Fatalf("a scrape while the gauges were set found %d ECE, %d PSI and %d alarm series, want %d, %d and %d",
				n["system1_calibration_ece"], n["system1_answer_drift_psi"], n["system1_answer_drift_alarm"], len(eces), len(drifts), len(drifts))
		}
	}
	m.SetECE(append(eces, ECE{"m", "choice", "2", 0.9}))
	if n := count()["system1_calibration_ece"]; n != len(eces) {
		t.Errorf("%d ECE series after a set with labels given twice, want %d", n, len(eces))
	}
}

// The drift gauges' series are bounded whatever the callers ask: a
// signature is a hash of a question's options, which callers choose, so
// a caller sending fresh options each request would add two series a
// request for as long as the windows hold them. At most
// MaxDriftSignatures are exposed, the alarming ones first, then the
// largest PSI.
func TestDriftSeriesBounded(t *testing.T) {
	m := New()
	var points []Drift
	for i := range 3 * MaxDriftSignatures {
		points = append(points, Drift{Model: "m", Signature: fmt.Sprintf("choice/2/%012x", i)})
	}
	points = append(points, Drift{Model: "m", Signature: "choice/2/alarm", PSI: 0.3, Alarm: true}, Drift{Model: "m", Signature: "choice/2/high", PSI: 0.9})
	m.SetDrift(points)
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	for _, name := range []string{"system1_answer_drift_psi", "system1_answer_drift_alarm"} {
		if got[name] > MaxDriftSignatures {
			t.Errorf("%s: %d series from %d signatures, want at most %d", name, got[name], len(points), MaxDriftSignatures)
		}
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{
		`system1_answer_drift_alarm{model="m",signature="choice/2/alarm"} 1`,
		`system1_answer_drift_psi{model="m",signature="choice/2/high"} 0.9`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q, which a bound must keep", want)
		}
	}
}
