package metrics

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// ShadowCounts are a shadow rollout's counts at the time of a scrape.
type ShadowCounts struct {
	Sampled, Dropped, Failed, Asked uint64
	Queued                          int
}

// WatchShadow exports the shadow rollouts' counts, read from counts at
// every scrape: requests sampled, dropped (the queue was full), failed
// (the candidate did not answer) and asked, and the queue's depth.
func (m *Metrics) WatchShadow(counts func() ShadowCounts) {
	m.reg.MustRegister(collector{[]*prometheus.Desc{shadowDesc, shadowQueueDesc}, func(ch chan<- prometheus.Metric) {
		s := counts()
		for _, v := range []struct {
			outcome string
			n       uint64
		}{{"sampled", s.Sampled}, {"dropped", s.Dropped}, {"failed", s.Failed}, {"asked", s.Asked}} {
			ch <- prometheus.MustNewConstMetric(shadowDesc, prometheus.CounterValue, float64(v.n), v.outcome)
		}
		ch <- prometheus.MustNewConstMetric(shadowQueueDesc, prometheus.GaugeValue, float64(s.Queued))
	}})
}

var (
	shadowDesc = prometheus.NewDesc("system1_shadow_requests_total",
		"Requests drawn for a shadow rollout, by what became of them: sampled (all drawn), dropped (the queue was full), failed (the candidate did not answer), asked (answered and logged).", []string{"outcome"}, nil)
	shadowQueueDesc = prometheus.NewDesc("system1_shadow_queue_depth", "Shadowed requests waiting for a worker.", nil, nil)
)

// MaxDriftSignatures bounds the (model, signature) pairs the drift gauges
// expose: a signature is a hash of a question's options, which callers
// choose, so without a bound a caller sending fresh options with each
// request would add two series a request for as long as the windows
// hold its answers. The full list is GET /v1/calibration's drift.
const MaxDriftSignatures = 1000

// Drift is one model and question signature's label-free drift, for the
// gauges.
type Drift struct {
	Model, Signature string
	PSI              float64
	Alarm            bool
}

// SetDrift replaces the drift gauges (system1_answer_drift_psi, the
// larger population stability index of a signature's confidences and top
// answers against the reference window, and system1_answer_drift_alarm,
// 1 where it alarms) with points: at most MaxDriftSignatures of them,
// those that alarm first, then the largest PSI.
func (m *Metrics) SetDrift(points []Drift) {
	if len(points) > MaxDriftSignatures {
		points = slices.Clone(points)
		slices.SortStableFunc(points, func(a, b Drift) int {
			return cmp.Or(cmp.Compare(one(b.Alarm), one(a.Alarm)), cmp.Compare(b.PSI, a.PSI))
		})
		points = points[:MaxDriftSignatures]
	}
	var g gauges
	for _, p := range points {
		g.add(driftPSIDesc, p.PSI, p.Model, p.Signature)
		g.add(driftAlarmDesc, one(p.Alarm), p.Model, p.Signature)
	}
	m.drift().Store(&g.ms)
}

var (
	driftPSIDesc = prometheus.NewDesc("system1_answer_drift_psi",
		"Population stability index of the recent answers' confidences or top answers against the reference window, the larger, per model and question signature.", []string{"model", "signature"}, nil)
	driftAlarmDesc = prometheus.NewDesc("system1_answer_drift_alarm",
		"1 where a model and question signature's answers drifted past the threshold (PSI less its sampling noise), else 0.", []string{"model", "signature"}, nil)
)
