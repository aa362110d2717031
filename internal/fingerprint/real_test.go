package fingerprint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/fingerprint"
	"system1/internal/testengine"
)

// The measurements of docs/fingerprints.md: the canary read again and
// again from one build of a model on a real engine, under the conditions
// that change an engine's arithmetic without changing the build (1 or 4
// slots, other requests batched beside it, a cold or a warm prompt cache,
// a restart), and read once from each of several builds of one shape
// under one name. The test holds the tolerance between the two: every
// repeat read within a fifth of it, every two builds with other weights
// beyond three times it. (A tenth held until llama-server was built
// without AMX: its F16 build read under load has moved by 0.00144 in
// every run since, 0 to 0.00085 before.) Two pairs are reported and not
// held: the same weights in F32 and F16, which move the canary by 0.001
// to 0.002, a change the tolerance counts as none (the identity tells
// them apart); and two builds that are uninformative on every question
// (random weights on Ollama), which the canary cannot tell apart at all.

// alias is the one name every build is served under.
const alias = "canary-model"

// build is one model file measured; builds with the same weights share a
// weights name.
type build struct{ name, weights, path string }

// builds are the model files measured: the tiny model, the same in F16,
// and two random-weight models of its shape.
func builds(t *testing.T) []build {
	t.Helper()
	random := testengine.RandomModels(t, 1, 2)
	return []build{
		{"stories260K", "stories260K", testengine.ModelPath()},
		{"stories260K-f16", "stories260K", testengine.StoriesF16(t)},
		{"random-1", "random-1", random[0]},
		{"random-2", "random-2", random[1]},
	}
}

// measurement collects the deltas of one engine's measurements.
type measurement struct {
	t       *testing.T
	refs    map[string]fingerprint.Reading // each build's first reading
	weights map[string]string              // each build's weights
	repeat  []result                       // repeat reads against their build's reference
}

type result struct {
	build, condition string
	delta            float64
}

func newMeasurement(t *testing.T) *measurement {
	return &measurement{t: t, refs: map[string]fingerprint.Reading{}, weights: map[string]string{}}
}

// read reads the canary from e and records it: the first read of a build
// is its reference, later ones are repeats under condition.
func (m *measurement) read(e engine.Engine, model string, b build, condition string) fingerprint.Reading {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, use, err := engine.ReadCanary(ctx, e, model)
	if err != nil {
		m.t.Fatalf("%s, %s: %v", b.name, condition, err)
	}
	ref, ok := m.refs[b.name]
	if !ok {
		m.refs[b.name], m.weights[b.name] = r, b.weights
		m.t.Logf("%s: reference (%s): %s; %d calls, %d input and %d output tokens", b.name, condition, show(r), use.Calls, use.InputTokens, use.OutputTokens)
		return r
	}
	d := fingerprint.Delta(ref, r)
	m.repeat = append(m.repeat, result{b.name, condition, d})
	return r
}

// underLoad reads the canary while k other clients keep asking other
// questions over other states of the same model, so that the engine
// batches the canary's calls with theirs. The canary starts once every
// client has had a reply, so that the load is running however long the
// engine takes to answer the first calls; the clients ask until it ends.
func (m *measurement) underLoad(e engine.Engine, model string, b build, k int) {
	m.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	asked := make([]atomic.Int64, k)
	for i := range k {
		wg.Go(func() {
			q := fingerprint.Questions()[1]
			for n := 0; ctx.Err() == nil; n++ {
				state := json.RawMessage(fmt.Sprintf(`{"ticket":"load %d from client %d: the invoice shows the wrong address","n":%d}`, n, i, n))
				// An uninformative answer ran the model all the same.
				if _, err := engine.Ask(ctx, e, model, state, q); err == nil || engine.Classify(err).Uninformative {
					asked[i].Add(1)
				}
			}
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for i := range asked {
		for asked[i].Load() == 0 {
			if time.Now().After(deadline) {
				m.t.Fatalf("%s: load client %d got no reply in 2 minutes: the canary cannot be read under load", b.name, i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	m.read(e, model, b, fmt.Sprintf("under load of %d clients", k))
}

// report logs the table of repeat and cross-build deltas and returns the
// largest repeat delta and the smallest delta between two builds with
// other weights that are not both uninformative everywhere.
func (m *measurement) report(engineName string) (maxRepeat, minCross float64) {
	m.t.Helper()
	var lines []string
	for _, r := range m.repeat {
		lines = append(lines, fmt.Sprintf("  %-16s %-34s %.3g", r.build, r.condition, r.delta))
		maxRepeat = math.Max(maxRepeat, r.delta)
	}
	m.t.Logf("%s: repeat reads of one build, delta to its reference:\n%s\n  max %.3g", engineName, strings.Join(lines, "\n"), maxRepeat)
	names := make([]string, 0, len(m.refs))
	for n := range m.refs {
		names = append(names, n)
	}
	sort.Strings(names)
	lines = nil
	minCross = math.Inf(1)
	for i, a := range names {
		for _, b := range names[i+1:] {
			d := fingerprint.Delta(m.refs[a], m.refs[b])
			note := ""
			switch {
			case m.weights[a] == m.weights[b]:
				note = " (the same weights in another precision: not held)"
			case blind(m.refs[a]) && blind(m.refs[b]):
				note = " (both uninformative on every question: the canary cannot tell them apart)"
			default:
				minCross = math.Min(minCross, d)
			}
			lines = append(lines, fmt.Sprintf("  %-16s %-16s %.3g%s", a, b, d, note))
		}
	}
	m.t.Logf("%s: delta between builds:\n%s\n  min %.3g", engineName, strings.Join(lines, "\n"), minCross)
	return maxRepeat, minCross
}

// blind reports whether every question of r was uninformative.
func blind(r fingerprint.Reading) bool {
	return !slices.ContainsFunc(r.Dists, func(d decision.Distribution) bool { return d != nil })
}

func show(r fingerprint.Reading) string {
	var parts []string
	for i, q := range fingerprint.Questions() {
		if r.Dists[i] == nil {
			parts = append(parts, q.ID+"=uninformative")
			continue
		}
		var ps []string
		for _, p := range r.Dists[i] {
			ps = append(ps, fmt.Sprintf("%.4f", p))
		}
		parts = append(parts, q.ID+"=["+strings.Join(ps, " ")+"]")
	}
	return strings.Join(parts, " ") + " model=" + r.Model
}

// hold checks the measured separation against the tolerance.
func hold(t *testing.T, maxRepeat, minCross float64) {
	t.Helper()
	tol := fingerprint.DefaultTolerance
	if !(maxRepeat*5 <= tol) {
		t.Errorf("a repeat read of one build moved by %.3g, more than a fifth of the tolerance %.3g", maxRepeat, tol)
	}
	if !(minCross >= 3*tol) {
		t.Errorf("two builds were only %.3g apart, less than three times the tolerance %.3g", minCross, tol)
	}
}

func needs(t *testing.T, env string) {
	t.Helper()
	if os.Getenv(env) == "" && os.Getenv("SYSTEM1_REQUIRE_ENGINE") == "" {
		t.Skipf("a measurement on the real engine: set %s to run it", env)
	}
}

func TestCanaryToleranceOnLlamaServer(t *testing.T) {
	needs(t, "SYSTEM1_LLAMA_SERVER")
	m := newMeasurement(t)
	for _, b := range builds(t) {
		s := testengine.StartWith(t, testengine.Config{Model: b.path, Alias: alias, Slots: 1})
		e := &llamacpp.Engine{BaseURL: s.URL}
		m.read(e, alias, b, "1 slot, cold")
		m.read(e, alias, b, "1 slot, warm")
		m.read(e, alias, b, "1 slot, warm again")
		s.Restart(t, testengine.Config{Slots: 4})
		e = &llamacpp.Engine{BaseURL: s.URL} // a new server: nothing learnt of the old one
		m.read(e, alias, b, "4 slots, cold")
		m.underLoad(e, alias, b, 3)
		m.read(e, alias, b, "4 slots, warm")
		pinned := &llamacpp.Engine{BaseURL: s.URL, PinSlots: true, SpreadSlots: true}
		m.read(pinned, alias, b, "4 slots, pinned and spread")
		s.Restart(t, testengine.Config{Slots: 1})
		e = &llamacpp.Engine{BaseURL: s.URL}
		m.read(e, alias, b, "restarted, 1 slot")
		s.Stop()
	}
	maxRepeat, minCross := m.report("llama-server")
	hold(t, maxRepeat, minCross)
}

func TestCanaryToleranceOnOllama(t *testing.T) {
	needs(t, "SYSTEM1_OLLAMA")
	m := newMeasurement(t)
	bs := builds(t)
	o := testengine.StartOllamaWith(t, testengine.OllamaConfig{Parallel: 1})
	e := &ollama.Engine{BaseURL: o.URL}
	for _, b := range bs {
		o.Create(t, alias, b.path)
		m.read(e, alias, b, "1 parallel, cold (model loads)")
		m.read(e, alias, b, "1 parallel, warm")
		m.underLoad(e, alias, b, 3)
		o.Restart(t)
		m.read(e, alias, b, "restarted, 1 parallel")
	}
	o.Stop()
	o4 := testengine.StartOllamaWith(t, testengine.OllamaConfig{Parallel: 4})
	e4 := &ollama.Engine{BaseURL: o4.URL}
	for _, b := range bs {
		o4.Create(t, alias, b.path)
		m.read(e4, alias, b, "4 parallel, cold (another server)")
		m.underLoad(e4, alias, b, 3)
		m.read(e4, alias, b, "4 parallel, warm")
	}
	maxRepeat, minCross := m.report("ollama")
	hold(t, maxRepeat, minCross)
}
