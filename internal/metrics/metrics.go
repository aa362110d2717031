// Package metrics holds system1's Prometheus metrics, on a registry of its
// own so that tests and several servers in one process do not collide.
package metrics

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the server's counters, gauges and histograms.
type Metrics struct {
	reg            *prometheus.Registry
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	attempts       *prometheus.CounterVec
	attemptSeconds *prometheus.HistogramVec
	failovers      *prometheus.CounterVec
	cooldowns      *prometheus.CounterVec
	modelChanges   *prometheus.CounterVec
	canaryCalls    *prometheus.CounterVec
	cost           *prometheus.CounterVec
	refusals       *prometheus.CounterVec
	keySpend       *prometheus.CounterVec

	// ece and drift register their gauges on first use.
	ece, drift func() *atomic.Pointer[[]prometheus.Metric]
}

// Latency buckets from 1 ms to 30 s: decisions take tens to hundreds of
// milliseconds, cold engines seconds.
var buckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// New registers the metrics, plus Go runtime and process metrics.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg:      reg,
		requests: counterVec("system1_requests_total", "HTTP requests by route, status code and key name (empty for none, a wrong one, or auth off).", "route", "code", "key"),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "system1_request_seconds", Help: "HTTP request latency by route.", Buckets: buckets,
		}, []string{"route"}),
		attempts: counterVec("system1_engine_attempts_total", "Engine calls by node, model and outcome.", "node", "model", "outcome"),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "system1_engine_seconds", Help: "Engine call latency by node and model.", Buckets: buckets,
		}, []string{"node", "model"}),
		failovers:    counterVec("system1_failovers_total", "Questions moved to another node after a failure, by model.", "model"),
		cooldowns:    counterVec("system1_cooldowns_total", "Times a node was cooled down.", "node"),
		modelChanges: counterVec("system1_model_changes_total", "Changes of the build a node serves under a model name, seen by its fingerprint (docs/fingerprints.md): an alarm, since fits learnt on the old build stop applying.", "node", "model"),
		canaryCalls:  counterVec("system1_canary_calls_total", "Engine calls the fingerprint canary made, by node, model and the reading's outcome (ok or failed).", "node", "model", "outcome"),
		cost:         counterVec("system1_cost_usd_total", "US dollars the answers cost, by model and the node that answered, at the nodes' configured price (nodes without one are not counted); a decision cache hit costs nothing.", "model", "node"),
		refusals:     counterVec("system1_refusals_total", "Questions whose answer system1 would not stand behind (a 422 on the System One wire, a refusal on the Decisions wire, an abstention on decide), by the model asked and the reason (docs/http-api.md); a cascade's stage counts its own, which the next stage may answer; a decision cache hit is not counted.", "model", "reason"),
		keySpend:     counterVec("system1_key_spend_usd_total", "US dollars the answers asked with each key cost, by the key's name (never the key), as its budget counts them; answers of nodes without a price are not counted.", "key"),
	}
	reg.MustRegister(m.requests, m.requestSeconds, m.attempts, m.attemptSeconds, m.failovers, m.cooldowns, m.modelChanges, m.canaryCalls, m.cost, m.refusals, m.keySpend)
	m.ece = sync.OnceValue(func() *atomic.Pointer[[]prometheus.Metric] { return m.register(eceDesc) })
	m.drift = sync.OnceValue(func() *atomic.Pointer[[]prometheus.Metric] { return m.register(driftPSIDesc, driftAlarmDesc) })
	return m
}

// Node is one node's state at the time of a scrape.
type Node struct {
	Name     string
	Healthy  bool
	InFlight int
	Queued   int
	// Constraint is whether the node holds its constraint (holds,
	// failed, unprobed or not_constrained); empty reports none.
	Constraint string
	// Lists are the calls of several prompts it was sent and the prompts
	// they carried; reported where Listed (prompts_per_call).
	Listed                 bool
	ListCalls, ListPrompts int64
}

// ConstraintStates are the values system1_node_constraint's state label
// takes, one series each per node.
var ConstraintStates = []string{"holds", "failed", "unprobed", "not_constrained"}

// WatchNodes reports the nodes' states, read from states at every scrape:
// whether each is healthy (not cooling down), its calls in flight, its
// queue depth, and whether it holds its constraint of the first token.
func (m *Metrics) WatchNodes(states func() []Node) {
	m.reg.MustRegister(collector{[]*prometheus.Desc{upDesc, inFlightDesc, queuedDesc, listCallsDesc, listPromptsDesc, constraintDesc}, func(ch chan<- prometheus.Metric) {
		for _, n := range states() {
			ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, one(n.Healthy), n.Name)
			ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(n.InFlight), n.Name)
			ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(n.Queued), n.Name)
			if n.Listed {
				ch <- prometheus.MustNewConstMetric(listCallsDesc, prometheus.CounterValue, float64(n.ListCalls), n.Name)
				ch <- prometheus.MustNewConstMetric(listPromptsDesc, prometheus.CounterValue, float64(n.ListPrompts), n.Name)
			}
			if n.Constraint == "" {
				continue
			}
			for _, st := range ConstraintStates {
				ch <- prometheus.MustNewConstMetric(constraintDesc, prometheus.GaugeValue, one(st == n.Constraint), n.Name, st)
			}
		}
	}})
}

// collector is a collector of the metrics descs describe, which collect
// makes at every scrape.
type collector struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

var (
	upDesc          = prometheus.NewDesc("system1_node_up", "1 when the node is healthy, 0 while it cools down.", []string{"node"}, nil)
	inFlightDesc    = prometheus.NewDesc("system1_node_in_flight", "Engine calls in flight per node.", []string{"node"}, nil)
	queuedDesc      = prometheus.NewDesc("system1_node_queue_depth", "Engine calls waiting for a slot per node.", []string{"node"}, nil)
	listCallsDesc   = prometheus.NewDesc("system1_node_list_calls_total", "Engine calls of several prompts per node (llamacpp prompts_per_call).", []string{"node"}, nil)
	listPromptsDesc = prometheus.NewDesc("system1_node_list_prompts_total", "Prompts the engine calls of several prompts carried, per node: over system1_node_list_calls_total, the prompts a call.", []string{"node"}, nil)
	constraintDesc  = prometheus.NewDesc("system1_node_constraint",
		"1 for the state of the node's constraint of the first token to the labels (holds, failed, unprobed, not_constrained), 0 for the others.", []string{"node", "state"}, nil)
)

// one is a gauge's value for b: 1 when true, 0 when false.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Request records one HTTP request, of the key named key: a configured
// key's name, never the key, or "" (so the label's values are the
// configured names and "").
func (m *Metrics) Request(route, code, key string, d time.Duration) {
	m.requests.WithLabelValues(route, code, key).Inc()
	m.requestSeconds.WithLabelValues(route).Observe(d.Seconds())
}

// Attempt records one engine call.
func (m *Metrics) Attempt(node, model, outcome string, d time.Duration) {
	m.attempts.WithLabelValues(node, model, outcome).Inc()
	m.attemptSeconds.WithLabelValues(node, model).Observe(d.Seconds())
}

// Spent records what an answer of model by node cost, in US dollars.
func (m *Metrics) Spent(node, model string, usd float64) {
	m.cost.WithLabelValues(model, node).Add(usd)
}

// Refused counts a question of model refused for reason.
func (m *Metrics) Refused(model, reason string) {
	m.refusals.WithLabelValues(model, reason).Inc()
}

// KeySpent counts what an answer asked with key (its name, never the
// key) cost: system1_key_spend_usd_total.
func (m *Metrics) KeySpent(key string, usd float64) {
	m.keySpend.WithLabelValues(key).Add(usd)
}

// Failover records a question moving on after a failed node.
func (m *Metrics) Failover(model string) { m.failovers.WithLabelValues(model).Inc() }

// Cooldown records a node being cooled down.
func (m *Metrics) Cooldown(node string) { m.cooldowns.WithLabelValues(node).Inc() }

// ModelChanged records a change of the build node serves under model.
func (m *Metrics) ModelChanged(node, model string) { m.modelChanges.WithLabelValues(node, model).Inc() }

// Canary records the engine calls one canary reading of model on node
// made, and whether it read (outcome ok or failed).
func (m *Metrics) Canary(node, model, outcome string, calls int) {
	m.canaryCalls.WithLabelValues(node, model, outcome).Add(float64(calls))
}

// counterVec is a counter with labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// counter is a counter read from f at every scrape.
func counter(name, help string, f func() uint64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
}

// WatchDecisionLog exports the decision log's counts: records dropped
// (the queue was full or the log closing), written, and lost to failed
// writes. Each function is read at every scrape.
func (m *Metrics) WatchDecisionLog(dropped, written, failed func() uint64) {
	m.reg.MustRegister(
		counter("system1_decision_log_dropped_total", "Decision log records dropped because the queue was full or the log was closing.", dropped),
		counter("system1_decision_log_written_total", "Decision log records written.", written),
		counter("system1_decision_log_failed_total", "Decision log records lost to failed writes.", failed),
	)
}

// WatchCache exports the decision cache's counts: requests answered from
// it (hits), answered by the engines and kept (misses), answered and not
// kept (bypassed: the batch prior), and the waits for an identical
// request being asked (coalesced). Each function is read at every scrape.
func (m *Metrics) WatchCache(hits, misses, bypassed, coalesced func() uint64) {
	m.reg.MustRegister(
		counter("system1_cache_hits_total", "Requests answered from the decision cache, no engine asked.", hits),
		counter("system1_cache_misses_total", "Requests the engines answered with the decision cache on, their answers kept for repeats.", misses),
		counter("system1_cache_bypassed_total", "Requests the engines answered with the decision cache on and whose answers were not kept (the batch prior).", bypassed),
		counter("system1_cache_coalesced_total", "Times a request that missed the decision cache waited for an identical one being asked, to be answered from the cache after it.", coalesced),
	)
}

// ECE is one bucket's rolling expected calibration error, for a gauge.
type ECE struct {
	Model, Kind, Bucket string
	ECE                 float64
}

// SetECE replaces the rolling ECE gauges (system1_calibration_ece: the
// recent answers with outcomes under the fits in use, per model, kind and
// bucket) with points.
func (m *Metrics) SetECE(points []ECE) {
	var g gauges
	for _, p := range points {
		g.add(eceDesc, p.ECE, p.Model, p.Kind, p.Bucket)
	}
	m.ece().Store(&g.ms)
}

var eceDesc = prometheus.NewDesc("system1_calibration_ece",
	"Expected calibration error of the recent answers with outcomes, under the fits in use, per model, kind and option bucket.",
	[]string{"model", "kind", "bucket"}, nil)

// register registers gauges of descs set whole (SetECE, SetDrift): a
// scrape reads the last set stored in full, where a vector's Reset and
// then its Sets let a scrape between them find a few of the series or
// none.
func (m *Metrics) register(descs ...*prometheus.Desc) *atomic.Pointer[[]prometheus.Metric] {
	var last atomic.Pointer[[]prometheus.Metric]
	m.reg.MustRegister(collector{descs, func(ch chan<- prometheus.Metric) {
		if ms := last.Load(); ms != nil {
			for _, m := range *ms {
				ch <- m
			}
		}
	}})
	return &last
}

// gauges collects gauges set whole: the last value given for the same
// labels, as a vector keeps the last Set (a registry refuses a series
// collected twice); labels that are not valid are left out, where a
// vector would panic.
type gauges struct {
	ms   []prometheus.Metric
	seen map[string]int
}

func (g *gauges) add(d *prometheus.Desc, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...)
	if err != nil {
		return
	}
	k := d.String() + "\xff" + strings.Join(labels, "\xff")
	if i, ok := g.seen[k]; ok {
		g.ms[i] = m
		return
	}
	if g.seen == nil {
		g.seen = map[string]int{}
	}
	g.seen[k] = len(g.ms)
	g.ms = append(g.ms, m)
}
