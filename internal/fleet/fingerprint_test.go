package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fingerprint"
)

// printObserver records what the fingerprint probes tell an observer.
type printObserver struct {
	noObserver
	mu      sync.Mutex
	calls   map[string]int // canary engine calls by node/model/outcome
	changes map[string]int // changes by node/model
}

func (o *printObserver) Canary(node, model, outcome string, calls int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[node+"/"+model+"/"+outcome] += calls
}

func (o *printObserver) ModelChanged(node, model string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changes[node+"/"+model]++
}

func (o *printObserver) count(m map[string]int, k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return m[k]
}

// The background probe fingerprints each model a node serves: its first
// probe is the reference, answers carry its fingerprint, a canary that
// moved is seen once its interval passed and a new identity at once, and
// each change is a log line, a count and the node's state, with a new
// fingerprint on the answers from then on.
func TestProbeFingerprintsTheServedBuilds(t *testing.T) {
	for _, d := range []fakeengine.Dialect{fakeengine.LlamaCpp, fakeengine.Ollama, fakeengine.OpenAI} {
		t.Run(string(d), func(t *testing.T) {
			f := fakeengine.New(fakeengine.Options{Dialect: d, Build: "one", Behavior: fakeengine.Behavior{Logprobs: fakeengine.Halving}})
			t.Cleanup(f.Close)
			n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: string(d), Models: []string{fakeengine.DefaultModel},
				Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
			if err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			obs := &printObserver{calls: map[string]int{}, changes: map[string]int{}}
			r := New([]*Node{n}, Options{Observer: obs, Fingerprint: FingerprintOptions{CanaryEvery: time.Hour,
				Log: slog.New(slog.NewTextHandler(&logged, nil))}})
			clock := &lockedClock{t: time.Unix(1e9, 0)}
			r.now = clock.now
			key := "n/" + fakeengine.DefaultModel
			state := func() Fingerprint {
				t.Helper()
				fs := n.State(r.now()).Fingerprints
				if len(fs) != 1 || fs[0].Model != fakeengine.DefaultModel {
					t.Fatalf("fingerprints %+v, want one of %s", fs, fakeengine.DefaultModel)
				}
				return fs[0]
			}
			req := choiceRequest(fakeengine.DefaultModel, 3)

			if a := decide(t, r, req); a.Fingerprint != "" {
				t.Fatalf("an answer before any probe carries fingerprint %q", a.Fingerprint)
			}
			r.Probe(t.Context())
			first := state()
			if first.ID == "" || first.Changes != 0 || !first.Since.Equal(clock.now()) || first.Error != "" {
				t.Fatalf("after the first probe: %+v", first)
			}
			calls := obs.count(obs.calls, key+"/ok")
			if calls < 3 {
				t.Fatalf("the first probe's canary made %d engine calls, want one a question at least", calls)
			}
			if a := decide(t, r, req); a.Fingerprint != first.ID || !a.Since.Equal(first.Since) {
				t.Fatalf("answer served by %q since %v, want %q since %v", a.Fingerprint, a.Since, first.ID, first.Since)
			}

			// Other answers under the same build: the canary is not due
			// again for an hour, so nothing is seen yet.
			f.Set(fakeengine.Behavior{Logprobs: fakeengine.Uniform})
			clock.advance(time.Minute)
			r.Probe(t.Context())
			if s := state(); s.ID != first.ID || s.Changes != 0 || obs.count(obs.calls, key+"/ok") != calls {
				t.Fatalf("a probe before the canary is due: %+v, %d canary calls (was %d)", s, obs.count(obs.calls, key+"/ok"), calls)
			}
			clock.advance(time.Hour)
			r.Probe(t.Context())
			moved := state()
			if moved.ID == first.ID || moved.Changes != 1 || !moved.Since.Equal(clock.now()) || !strings.Contains(moved.Change, "canary moved") {
				t.Fatalf("the canary moved: %+v (first %s)", moved, first.ID)
			}
			if got := obs.count(obs.changes, key); got != 1 {
				t.Fatalf("%d changes observed, want 1", got)
			}
			if a := decide(t, r, req); a.Fingerprint != moved.ID {
				t.Fatalf("answer served by %q after the change, want %q", a.Fingerprint, moved.ID)
			}
			clock.advance(time.Minute)
			r.Probe(t.Context())
			if s := state(); s.ID != moved.ID || s.Changes != 1 {
				t.Fatalf("one change reported twice: %+v", s)
			}

			// A new identity is seen at the next probe, its canary read
			// with it.
			f.SetBuild("two")
			clock.advance(time.Minute)
			r.Probe(t.Context())
			retagged := state()
			if retagged.ID == moved.ID || retagged.Changes != 2 || strings.Contains(retagged.Change, "canary moved") || !strings.Contains(retagged.Change, "changed from") {
				t.Fatalf("a new identity: %+v", retagged)
			}
			if got := obs.count(obs.changes, key); got != 2 {
				t.Fatalf("%d changes observed, want 2", got)
			}
			if lines := strings.Count(logged.String(), "the build a node serves under a model name changed"); lines != 2 {
				t.Fatalf("%d change lines logged, want 2:\n%s", lines, logged.String())
			}
		})
	}
}

// With fingerprints off, the probe reads no identity and asks no canary,
// and answers carry none.
func TestFingerprintsOff(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one"})
	t.Cleanup(f.Close)
	n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{Fingerprint: FingerprintOptions{Off: true}})
	r.Probe(t.Context())
	if fs := n.State(r.now()).Fingerprints; len(fs) != 0 {
		t.Fatalf("fingerprints %+v with fingerprints off", fs)
	}
	if got := len(f.Inferences()); got != 0 {
		t.Fatalf("%d inferences from a probe with fingerprints off", got)
	}
	if a := decide(t, r, choiceRequest(fakeengine.DefaultModel, 3)); a.Fingerprint != "" {
		t.Fatalf("answer carries fingerprint %q with fingerprints off", a.Fingerprint)
	}
}

// A batch prior learnt on one build is not divided out of another's
// answers: after a change its estimate starts afresh.
func TestBatchPriorIsPerBuild(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one"})
	t.Cleanup(f.Close)
	n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := New([]*Node{n}, Options{Prior: Prior{Mode: decision.PriorBatch, MinRequests: 2}, Fingerprint: FingerprintOptions{Log: slog.New(slog.DiscardHandler)}})
	r.Probe(t.Context())
	req := choiceRequest(fakeengine.DefaultModel, 3)
	for i, want := range []bool{false, false, true} {
		if a := decide(t, r, req); (a.Prior != nil) != want {
			t.Fatalf("answer %d of the first build: prior %v, want one %v", i, a.Prior, want)
		}
	}
	f.SetBuild("two")
	r.Probe(t.Context())
	for i, want := range []bool{false, false, true} {
		if a := decide(t, r, req); (a.Prior != nil) != want {
			t.Fatalf("answer %d of the second build: prior %v, want one %v", i, a.Prior, want)
		}
	}
}

// A node over an upstream (a System One or a Decisions endpoint) is
// fingerprinted as the other backends are: its model list is the
// identity, its canary one request (a question a Decisions endpoint
// refused read as uninformative), and a reply that moved is a change once
// the canary is due again.
func TestProbeFingerprintsAnUpstream(t *testing.T) {
	skewed := func(first float64) func(int) decision.Distribution {
		return func(n int) decision.Distribution {
			d := make(decision.Distribution, n)
			d[0] = first
			for i := 1; i < n; i++ {
				d[i] = (1 - first) / float64(n-1)
			}
			return d
		}
	}
	reply := func(first float64) fakeengine.Reply {
		return fakeengine.Reply{Model: fakeengine.DefaultModel, Dist: skewed(first), Refuse: []string{"urgency"}}
	}
	for _, c := range []struct {
		dialect string
		start   func() (url string, set func(fakeengine.Reply))
	}{
		{"systemone", func() (string, func(fakeengine.Reply)) {
			s := fakeengine.StartSystemOne(t, reply(0.7))
			return s.URL + "/v1/systemone", s.Set
		}},
		{"decisions", func() (string, func(fakeengine.Reply)) {
			d := fakeengine.StartDecisions(t, reply(0.7))
			return d.URL, d.Set
		}},
	} {
		t.Run(c.dialect, func(t *testing.T) {
			url, set := c.start()
			n, err := NewNode(config.Node{Name: "n", URL: url, Dialect: c.dialect, Models: []string{fakeengine.DefaultModel},
				Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
			if err != nil {
				t.Fatal(err)
			}
			obs := &printObserver{calls: map[string]int{}, changes: map[string]int{}}
			r := New([]*Node{n}, Options{Observer: obs, Fingerprint: FingerprintOptions{CanaryEvery: time.Hour,
				Log: slog.New(slog.DiscardHandler)}})
			clock := &lockedClock{t: time.Unix(1e9, 0)}
			r.now = clock.now
			key := "n/" + fakeengine.DefaultModel

			r.Probe(t.Context())
			fs := n.State(r.now()).Fingerprints
			if len(fs) != 1 || fs[0].ID == "" || fs[0].Error != "" {
				t.Fatalf("after the first probe: %+v", fs)
			}
			first := fs[0]
			if got := obs.count(obs.calls, key+"/ok"); got != 1 {
				t.Fatalf("the canary made %d calls of the upstream, want 1 (one request)", got)
			}
			if a := decide(t, r, choiceRequest(fakeengine.DefaultModel, 3)); a.Fingerprint != first.ID {
				t.Fatalf("answer served by %q, want %q", a.Fingerprint, first.ID)
			}
			set(reply(0.4))
			clock.advance(2 * time.Hour)
			r.Probe(t.Context())
			moved := n.State(r.now()).Fingerprints[0]
			if moved.ID == first.ID || moved.Changes != 1 || !strings.Contains(moved.Change, "canary moved") {
				t.Fatalf("the upstream's answers moved: %+v (first %s)", moved, first.ID)
			}
			if got := obs.count(obs.changes, key); got != 1 {
				t.Fatalf("%d changes observed, want 1", got)
			}
		})
	}
}

// A router that fingerprints on use (the faces with no background probe)
// contacts no node before a request; the first requests a build serves
// wait for one probe of it, shared, and carry its fingerprint; a build
// whose probe is old is probed again off the request's path, and the
// answers after it carry the new build. The refresh's canary is held in
// the engine until the request that started it has returned, so that the
// refresh cannot end first, however the two calls race; a request that
// waited for it would be let go after 10 s and carry the new build.
func TestFingerprintOnUse(t *testing.T) {
	for _, d := range []fakeengine.Dialect{fakeengine.LlamaCpp, fakeengine.Ollama} {
		t.Run(string(d), func(t *testing.T) {
			var hold atomic.Pointer[chan struct{}] // canary calls wait on it while set
			canaryState := string(fingerprint.State())
			f := fakeengine.New(fakeengine.Options{Dialect: d, Build: "one", Behavior: fakeengine.Behavior{Prompted: func(r fakeengine.Request) []float64 {
				if h := hold.Load(); h != nil {
					if p, ok := fakeengine.ParsePrompt(r.User); ok && p.State == canaryState {
						select {
						case <-*h:
						case <-time.After(10 * time.Second):
						}
					}
				}
				return fakeengine.Halving(r.Labels)
			}}})
			t.Cleanup(f.Close)
			n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: string(d), Models: []string{fakeengine.DefaultModel},
				Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
			if err != nil {
				t.Fatal(err)
			}
			obs := &printObserver{calls: map[string]int{}, changes: map[string]int{}}
			r := New([]*Node{n}, Options{Observer: obs, Fingerprint: FingerprintOptions{OnUse: true, ProbeEvery: time.Minute,
				CanaryEvery: time.Hour, Log: slog.New(slog.DiscardHandler)}})
			clock := &lockedClock{t: time.Unix(1e9, 0)}
			r.now = clock.now
			key := "n/" + fakeengine.DefaultModel
			req := choiceRequest(fakeengine.DefaultModel, 3)
			if got := len(f.Requests()); got != 0 {
				t.Fatalf("%d requests reached the engine before any was asked", got)
			}

			const callers = 8
			prints := make([]string, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					if res, err := r.Decide(t.Context(), req); err == nil && res.Questions[0].Err == nil {
						prints[i] = res.Questions[0].Fingerprint
					}
				})
			}
			wg.Wait()
			first := n.Fingerprint(fakeengine.DefaultModel)
			if first == "" {
				t.Fatalf("no build known after the first requests: %+v", n.State(r.now()).Fingerprints)
			}
			for i, p := range prints {
				if p != first {
					t.Fatalf("first request %d carries fingerprint %q, want %q", i, p, first)
				}
			}
			canary := obs.count(obs.calls, key+"/ok")
			if canary < 3 || canary != len(fingerprintQuestions(t)) {
				t.Fatalf("the first requests made %d canary calls, want one canary's (%d): one probe, shared", canary, len(fingerprintQuestions(t)))
			}

			// Within ProbeEvery nothing is probed again, whatever changed.
			f.SetBuild("two")
			before := len(f.Requests())
			if a := decide(t, r, req); a.Fingerprint != first {
				t.Fatalf("answer carries %q, want %q", a.Fingerprint, first)
			}
			if got := len(f.Requests()) - before; got != 1 {
				t.Fatalf("a request within ProbeEvery made %d engine requests, want its own 1", got)
			}

			// Past it, the request that finds the probe old starts one and
			// does not wait for it: the answer after it carries the new
			// build, counted as a change.
			clock.advance(2 * time.Minute)
			release := make(chan struct{})
			hold.Store(&release)
			a := decide(t, r, req)
			close(release)
			if a.Fingerprint != first {
				t.Fatalf("the request that starts a refresh carries %q, want the build known then, %q", a.Fingerprint, first)
			}
			waitProbes(t, n)
			second := n.Fingerprint(fakeengine.DefaultModel)
			if second == first || obs.count(obs.changes, key) != 1 {
				t.Fatalf("after the refresh: fingerprint %q (was %q), %d changes", second, first, obs.count(obs.changes, key))
			}
			if a := decide(t, r, req); a.Fingerprint != second {
				t.Fatalf("answer after the change carries %q, want %q", a.Fingerprint, second)
			}
		})
	}
}

// fingerprintQuestions are the canary's questions.
func fingerprintQuestions(t *testing.T) []decision.Question {
	t.Helper()
	return fingerprint.Request(fakeengine.DefaultModel).Questions
}

// waitProbes waits for n's on-use probes to end.
func waitProbes(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n.mu.Lock()
		running := len(n.probing)
		n.mu.Unlock()
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an on-use probe still runs after a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// A node's own fingerprint_tolerance holds wherever its builds are
// probed: two nodes over one engine, one held to the global 0.01 and one
// to its own 0.05, see one move of the canary (0.03) differently, by the
// background probe and by probes on use through sub-routers (Only). The
// tight node's build changes and says it was held to 0.01; the loose
// node's keeps its fingerprint, on its answers too, until the canary
// moves beyond 0.05, which it says. Before the move, the one build has
// one fingerprint on both.
func TestNodeFingerprintTolerance(t *testing.T) {
	skew := func(first float64) func([]string) []float64 {
		return func(labels []string) []float64 {
			lp := make([]float64, len(labels))
			for i := range lp {
				lp[i] = math.Log((1 - first) / float64(len(labels)-1))
			}
			lp[0] = math.Log(first)
			return lp
		}
	}
	for _, tc := range []struct {
		name  string
		onUse bool
	}{
		{"background probe", false},
		{"on use through Only", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Behavior: fakeengine.Behavior{Logprobs: skew(0.61234)}})
			t.Cleanup(f.Close)
			cfg, err := config.Parse(fmt.Appendf(nil, `
probe_every: 1m
fingerprint: {canary_every: 1h, tolerance: 0.01}
nodes:
  - {name: tight, url: %[1]s, dialect: llamacpp, models: [%[2]s]}
  - {name: loose, url: %[1]s, dialect: llamacpp, models: [%[2]s], fingerprint_tolerance: 0.05}
`, f.URL, fakeengine.DefaultModel))
			if err != nil {
				t.Fatal(err)
			}
			if errs := cfg.Check(); len(errs) > 0 {
				t.Fatal(errs)
			}
			obs := &printObserver{calls: map[string]int{}, changes: map[string]int{}}
			r, err := FromConfig(cfg, Options{Observer: obs, Fingerprint: FingerprintOptions{OnUse: tc.onUse, Log: slog.New(slog.DiscardHandler)}})
			if err != nil {
				t.Fatal(err)
			}
			clock := &lockedClock{t: time.Unix(1e9, 0)}
			r.now = clock.now
			nodes := map[string]*Node{}
			for _, n := range r.nodes {
				nodes[n.Name] = n
			}
			req := choiceRequest(fakeengine.DefaultModel, 3)
			// probe probes both nodes, past probe_every and canary_every.
			probe := func() {
				t.Helper()
				clock.advance(2 * time.Hour)
				if !tc.onUse {
					r.Probe(t.Context())
					return
				}
				for name, n := range nodes {
					decide(t, r.Only([]string{name}), req)
					waitProbes(t, n)
				}
			}
			state := func(name string) Fingerprint {
				t.Helper()
				fs := nodes[name].State(r.now()).Fingerprints
				if len(fs) != 1 || fs[0].ID == "" || fs[0].Error != "" {
					t.Fatalf("node %s: fingerprints %+v, want one probed", name, fs)
				}
				return fs[0]
			}
			changes := func(name string) int { return obs.count(obs.changes, name+"/"+fakeengine.DefaultModel) }

			probe()
			tight, loose := state("tight"), state("loose")
			// One build, one fingerprint: the node probed second finds the
			// build the first named, whatever their tolerances.
			if tight.ID != loose.ID {
				t.Errorf("one build named %s on the tight node and %s on the loose one", tight.ID, loose.ID)
			}

			f.Set(fakeengine.Behavior{Logprobs: skew(0.64234)})
			probe()
			if s := state("tight"); s.ID == tight.ID || s.Changes != 1 || changes("tight") != 1 || !strings.Contains(s.Change, "canary moved by 0.03 (tolerance 0.01)") {
				t.Errorf("the tight node after a move of 0.03: %+v, %d changes observed (first %s)", s, changes("tight"), tight.ID)
			}
			if s := state("loose"); s.ID != loose.ID || s.Changes != 0 || changes("loose") != 0 {
				t.Errorf("the loose node after a move of 0.03: %+v, %d changes observed (first %s)", s, changes("loose"), loose.ID)
			}
			if a := decide(t, r.Only([]string{"loose"}), req); a.Fingerprint != loose.ID {
				t.Errorf("the loose node's answer carries %q, want %q", a.Fingerprint, loose.ID)
			}

			f.Set(fakeengine.Behavior{Logprobs: skew(0.71234)})
			probe()
			if s := state("loose"); s.ID == loose.ID || s.Changes != 1 || changes("loose") != 1 || !strings.Contains(s.Change, "canary moved by 0.1 (tolerance 0.05)") {
				t.Errorf("the loose node after a move of 0.1: %+v, %d changes observed (first %s)", s, changes("loose"), loose.ID)
			}
		})
	}
}

// windowRecorder keeps the uncertain windows a router publishes.
type windowRecorder struct {
	mu sync.Mutex
	ws []uncertainWindow
}

func (w *windowRecorder) RecordUncertain(_ context.Context, node, model string, from, to time.Time, was, now string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ws = append(w.ws, uncertainWindow{node: node, model: model, from: from, to: to, was: was, now: now})
	return nil
}

// Every CheckEveryAnswers answers of a (node, model) its canary is read
// again, off the request path, though CanaryEvery has not passed; a read
// that finds the build confirms it, and a read that finds a change
// publishes the uncertain window from the last confirmation to the
// detection, to a recorder set later too.
func TestCheckEveryAnswersBoundsTheUncertainWindow(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Behavior: fakeengine.Behavior{Logprobs: fakeengine.Halving}})
	t.Cleanup(f.Close)
	n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel},
		Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs := &printObserver{calls: map[string]int{}, changes: map[string]int{}}
	r := New([]*Node{n}, Options{Observer: obs, Fingerprint: FingerprintOptions{CanaryEvery: time.Hour, CheckEveryAnswers: 5,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	clock := &lockedClock{t: time.Unix(1e9, 0)}
	r.now = clock.now
	key, req := "n/"+fakeengine.DefaultModel, choiceRequest(fakeengine.DefaultModel, 3)
	// answer answers k times and waits for the check the last answer
	// started, if any.
	answer := func(k int) {
		t.Helper()
		for range k {
			decide(t, r, req)
		}
		n.mu.Lock()
		done := n.probing[fakeengine.DefaultModel]
		n.mu.Unlock()
		if done != nil {
			<-done
		}
	}
	r.Probe(t.Context())
	first := n.Fingerprint(fakeengine.DefaultModel)
	reads := obs.count(obs.calls, key+"/ok")

	clock.advance(time.Minute)
	answer(4)
	if got := obs.count(obs.calls, key+"/ok"); got != reads {
		t.Fatalf("4 answers read the canary (%d calls, was %d)", got, reads)
	}
	answer(1)
	confirmed := clock.now()
	if got := obs.count(obs.calls, key+"/ok"); got != 2*reads {
		t.Fatalf("the 5th answer's check made %d canary calls in all, want %d", got, 2*reads)
	}

	f.Set(fakeengine.Behavior{Logprobs: fakeengine.Uniform})
	clock.advance(time.Minute)
	answer(5)
	now := n.Fingerprint(fakeengine.DefaultModel)
	if now == first || obs.count(obs.changes, key) != 1 {
		t.Fatalf("the check after the swap: build %s (was %s), %d changes", now, first, obs.count(obs.changes, key))
	}
	w := &windowRecorder{}
	r.RecordUncertainTo(w)
	want := uncertainWindow{node: "n", model: fakeengine.DefaultModel, from: confirmed, to: clock.now(), was: first, now: now}
	if len(w.ws) != 1 || w.ws[0] != want {
		t.Fatalf("windows %+v, want %+v", w.ws, want)
	}
}

// A suspicion (a drift alarm) reads the canary of every build served
// under the model at once, though CanaryEvery has not passed, and finds
// a swap there; an alarm that lasts reads it again only after notWithin.
func TestSuspectReadsTheCanaryOnce(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Behavior: fakeengine.Behavior{Logprobs: fakeengine.Halving}})
	t.Cleanup(f.Close)
	n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel},
		Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs := &printObserver{calls: map[string]int{}, changes: map[string]int{}}
	r := New([]*Node{n}, Options{Observer: obs, Fingerprint: FingerprintOptions{CanaryEvery: time.Hour,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	clock := &lockedClock{t: time.Unix(1e9, 0)}
	r.now = clock.now
	w := &windowRecorder{}
	r.RecordUncertainTo(w)
	key := "n/" + fakeengine.DefaultModel
	suspect := func(want int) {
		t.Helper()
		if got := r.Suspect(fakeengine.DefaultModel, time.Hour); got != want {
			t.Fatalf("Suspect started %d checks, want %d", got, want)
		}
		n.mu.Lock()
		done := n.probing[fakeengine.DefaultModel]
		n.mu.Unlock()
		if done != nil {
			<-done
		}
	}
	suspect(0) // never probed: the first probe reads it
	r.Probe(t.Context())
	first := n.Fingerprint(fakeengine.DefaultModel)
	reads := obs.count(obs.calls, key+"/ok")

	f.Set(fakeengine.Behavior{Logprobs: fakeengine.Uniform})
	clock.advance(time.Minute)
	suspect(1)
	if now := n.Fingerprint(fakeengine.DefaultModel); now == first || obs.count(obs.changes, key) != 1 || len(w.ws) != 1 || w.ws[0].was != first {
		t.Fatalf("the suspicion's check: build %s (was %s), %d changes, windows %+v", now, first, obs.count(obs.changes, key), w.ws)
	}
	clock.advance(time.Minute)
	suspect(0)
	if got := obs.count(obs.calls, key+"/ok"); got != 2*reads {
		t.Fatalf("%d canary calls in all, want %d: a lasting alarm read it again", got, 2*reads)
	}
	clock.advance(time.Hour)
	suspect(1)
}
