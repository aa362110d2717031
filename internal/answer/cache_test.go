package answer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
)

// fakeNode is a node named name over a fake llama.cpp engine serving m,
// answering as b.
func fakeNode(t testing.TB, name string, b fakeengine.Behavior) (*fleet.Node, *fakeengine.Fake) {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Behavior: b})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: name, URL: f.URL, Dialect: "llamacpp", Models: []string{"m"}, Timeout: config.Duration(5 * time.Second)},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	return n, f
}

// cachedService is the answer path over one fake node, with a cache of
// entries answers kept for ttl, recording into rec.
func cachedService(t testing.TB, entries int, ttl time.Duration, rec *records) (*answer.Service, *fakeengine.Fake, *answer.Cache) {
	t.Helper()
	n, f := fakeNode(t, "n", fakeengine.Behavior{Prompted: fakeengine.Leaning})
	c := answer.NewCache(entries, ttl)
	o := answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{}), Cache: c}
	if rec != nil {
		o.Recorder = rec
	}
	return answer.New(o), f, c
}

func ask(t testing.TB, svc *answer.Service, req answer.Request) *answer.Answer {
	t.Helper()
	a, err := svc.Answer(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A repeat is answered from the cache without asking the engine: the
// same distributions, steps and node, no attempts, no tokens, marked a
// hit; and it is recorded under its own request id, so that feedback on
// it finds it. What a caller does to the answer it got does not reach
// the cache.
func TestCacheAnswersAnExactRepeat(t *testing.T) {
	var rec records
	svc, f, c := cachedService(t, 16, time.Hour, &rec)
	req := twoQuestions("m")
	first := ask(t, svc, req)
	asked := len(f.Inferences())
	if first.Cache != answer.CacheMiss || asked == 0 || first.Usage.InputTokens == 0 {
		t.Fatalf("first answer: cache %q, %d engine calls, usage %+v", first.Cache, asked, first.Usage)
	}
	firstDists := [][]float64{append([]float64(nil), first.Questions[0].Dist...), append([]float64(nil), first.Questions[1].Dist...)}
	first.Questions[0].Dist[0] = 42 // a caller's change, which must not reach the cache

	req.RequestID = "req_2"
	again := ask(t, svc, req)
	if again.Cache != answer.CacheHit {
		t.Fatalf("repeat: cache %q", again.Cache)
	}
	if n := len(f.Inferences()); n != asked {
		t.Errorf("a hit asked the engine: %d calls, %d before", n, asked)
	}
	if again.Usage != (answer.Usage{}) || again.Model != "m" {
		t.Errorf("hit usage %+v, model %q", again.Usage, again.Model)
	}
	for i, q := range again.Questions {
		want := firstDists[i]
		if !same(want, q.Dist) || q.Node != "n" || q.Attempts != nil || q.Model != "m" {
			t.Errorf("question %d: dist %v (first %v), node %q, attempts %v", i, q.Dist, want, q.Node, q.Attempts)
		}
	}
	if len(rec.got) != 4 {
		t.Fatalf("%d records for two answers of two questions", len(rec.got))
	}
	for i, r := range rec.got[2:] {
		if r.RequestID != "req_2" || r.QuestionID != req.Questions[i].ID || r.Node != "n" || !same(r.Final, again.Questions[i].Dist) {
			t.Errorf("hit's record %d: %+v", i, r)
		}
	}
	if c.Hits() != 1 || c.Misses() != 1 || c.Bypassed() != 0 {
		t.Errorf("hits %d, misses %d, bypassed %d", c.Hits(), c.Misses(), c.Bypassed())
	}
}

// Without a cache (the default) every request asks the engine and says
// nothing of a cache.
func TestCacheOffByDefault(t *testing.T) {
	svc, f, _ := cachedService(t, 0, 0, nil)
	for range 2 {
		if a := ask(t, svc, twoQuestions("m")); a.Cache != "" {
			t.Fatalf("cache %q without a cache", a.Cache)
		}
	}
	if n := len(f.Inferences()); n != 4 {
		t.Errorf("%d engine calls for two requests of two questions", n)
	}
}

// Anything that changes the question changes the key: each variation of
// one request misses, and is a hit when asked again.
func TestCacheKeyHoldsTheRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*answer.Request)
	}{
		{"state", func(r *answer.Request) { r.State = json.RawMessage(`"about green"`) }},
		{"state's bytes", func(r *answer.Request) { r.State = json.RawMessage(`"about red" `) }},
		{"question id", func(r *answer.Request) { r.Questions[0].ID = "q2" }},
		{"instructions", func(r *answer.Request) { r.Questions[0].Instructions = json.RawMessage(`"Which colour is it?"`) }},
		{"no instructions", func(r *answer.Request) { r.Questions[0].Instructions = nil }},
		{"option name", func(r *answer.Request) { r.Questions[0].Options[2].Name = "cyan" }},
		{"option text", func(r *answer.Request) { r.Questions[0].Options[2].Text = json.RawMessage(`"the sky"`) }},
		{"option order", func(r *answer.Request) {
			o := r.Questions[0].Options
			o[0], o[1] = o[1], o[0]
		}},
		{"one question fewer", func(r *answer.Request) { r.Questions = r.Questions[:1] }},
		{"debias asked for", func(r *answer.Request) { r.Debias = decision.DebiasPermute }},
		{"content-free prior asked for", func(r *answer.Request) { r.Prior = decision.PriorContentFree }},
		{"another provider's fits", func(r *answer.Request) { r.Provider = "link2" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc, _, _ := cachedService(t, 16, time.Hour, nil)
			ask(t, svc, twoQuestions("m"))
			req := twoQuestions("m")
			c.change(&req)
			if a := ask(t, svc, req); a.Cache != answer.CacheMiss {
				t.Errorf("changed request: cache %q", a.Cache)
			}
			if a := ask(t, svc, req); a.Cache != answer.CacheHit {
				t.Errorf("changed request asked again: cache %q", a.Cache)
			}
		})
	}
}

// fitsAt is a fits file's content in memory, swapped as a reload or a
// refit swaps it.
type fitsAt struct {
	p atomic.Pointer[calibration.Fits]
}

func (f *fitsAt) current() *calibration.Fits { return f.p.Load() }

func tempered(revision string, temperature float64) *calibration.Fits {
	return &calibration.Fits{Version: calibration.FitsVersion, Revision: revision, Fits: []calibration.Fit{
		{Model: "m", Kind: decision.Choice, Bucket: calibration.Bucket(3), Temperature: temperature},
		{Model: "m", Kind: decision.Noul, Bucket: calibration.Bucket(2), Temperature: temperature},
	}}
}

// An answer is never served across a change of fits: a refit (a new
// revision), a file of another version, or a reload that kept the
// revision each miss, and the answer is the new fits'.
func TestCacheMissesAcrossAFitsChange(t *testing.T) {
	n, _ := fakeNode(t, "n", fakeengine.Behavior{Prompted: fakeengine.Leaning})
	var fits fitsAt
	fits.p.Store(tempered("r1", 2))
	svc := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{}), Fits: fits.current, Cache: answer.NewCache(16, time.Hour)})
	req := twoQuestions("m")
	if a := ask(t, svc, req); a.Cache != answer.CacheMiss || a.FitVersion != "r1" {
		t.Fatalf("first: cache %q, fits %q", a.Cache, a.FitVersion)
	}
	if a := ask(t, svc, req); a.Cache != answer.CacheHit || a.FitVersion != "r1" {
		t.Fatalf("repeat: cache %q, fits %q", a.Cache, a.FitVersion)
	}
	for _, c := range []struct {
		name string
		fits *calibration.Fits
	}{
		{"refit", tempered("r2", 0.5)},
		{"another file version", func() *calibration.Fits { f := tempered("r2", 0.5); f.Version++; return f }()},
		{"reloaded, same revision", tempered("r2", 0.5)},
		{"fits removed", nil},
	} {
		fits.p.Store(c.fits)
		a := ask(t, svc, req)
		want := ""
		if c.fits != nil {
			want = c.fits.Revision
		}
		if a.Cache != answer.CacheMiss || a.FitVersion != want || a.Fits != c.fits {
			t.Errorf("%s: cache %q, fits %q (want %q)", c.name, a.Cache, a.FitVersion, want)
		}
		if a := ask(t, svc, req); a.Cache != answer.CacheHit || a.Fits != c.fits {
			t.Errorf("%s, asked again: cache %q", c.name, a.Cache)
		}
	}
}

// An answer is never served across a change of model: one cache shared
// by the answer paths over other nodes (serve's two faces share one; a
// decide link is held to its own nodes) misses for each, and each answer
// is its own node's.
func TestCacheMissesAcrossAChangeOfNodes(t *testing.T) {
	a, _ := fakeNode(t, "a", fakeengine.Behavior{Prompted: fakeengine.Leaning})
	b, _ := fakeNode(t, "b", fakeengine.Behavior{})
	c := answer.NewCache(16, time.Hour)
	both := fleet.New([]*fleet.Node{a, b}, fleet.Options{})
	onA := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{a}, fleet.Options{}), Cache: c})
	onB := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{b}, fleet.Options{}), Cache: c})
	onBoth := answer.New(answer.Options{Router: both, Cache: c})
	req := twoQuestions("m")
	first := ask(t, onA, req)
	for _, s := range []struct {
		name, cache string
		svc         *answer.Service
		node        string
	}{
		{"another node's model", answer.CacheMiss, onB, "b"},
		{"a node more", answer.CacheMiss, onBoth, ""},
		// The same node and model as onB: its answer.
		{"a link held to node b", answer.CacheHit, onBoth.Only([]string{"b"}), "b"},
	} {
		got := ask(t, s.svc, req)
		if got.Cache != s.cache || (s.node != "" && got.Questions[0].Node != s.node) {
			t.Errorf("%s: cache %q, node %q", s.name, got.Cache, got.Questions[0].Node)
		}
		if got := ask(t, s.svc, req); got.Cache != answer.CacheHit {
			t.Errorf("%s, asked again: cache %q", s.name, got.Cache)
		}
	}
	if same(first.Questions[0].Dist, ask(t, onB, req).Questions[0].Dist) {
		t.Fatal("the two engines answer alike, so the test shows nothing")
	}
	if got := ask(t, onA, req); got.Cache != answer.CacheHit || !same(got.Questions[0].Dist, first.Questions[0].Dist) {
		t.Errorf("node a's answer again: cache %q, %v, first %v", got.Cache, got.Questions[0].Dist, first.Questions[0].Dist)
	}
}

// An answer is served for ttl after it was made, then asked again.
func TestCacheEntriesExpire(t *testing.T) {
	const ttl = 20 * time.Millisecond
	svc, f, _ := cachedService(t, 16, ttl, nil)
	req := twoQuestions("m")
	ask(t, svc, req)
	time.Sleep(2 * ttl) // past the ttl whatever the machine's load
	asked := len(f.Inferences())
	if a := ask(t, svc, req); a.Cache != answer.CacheMiss || len(f.Inferences()) == asked {
		t.Errorf("after the ttl: cache %q, engine asked %v", a.Cache, len(f.Inferences()) > asked)
	}
}

// A ttl under a microsecond, which the configuration lets through
// (cache.ttl: 50ns), makes a cache whose answers expire at once: the
// process goes on, every request a miss.
func TestCacheTinyTTLServes(t *testing.T) {
	for _, ttl := range []time.Duration{time.Nanosecond, 50 * time.Nanosecond, 99 * time.Nanosecond} {
		t.Run(ttl.String(), func(t *testing.T) {
			svc, _, _ := cachedService(t, 16, ttl, nil)
			req := twoQuestions("m")
			ask(t, svc, req)
			time.Sleep(10 * time.Millisecond) // the cache's sweeper starts meanwhile
			if a := ask(t, svc, req); a.Cache != answer.CacheMiss {
				t.Errorf("cache %q after the ttl, want miss", a.Cache)
			}
		})
	}
}

// The cache holds at most its entries, the least recently used evicted
// first.
func TestCacheIsBounded(t *testing.T) {
	svc, _, c := cachedService(t, 2, 0, nil)
	about := func(s string) answer.Request {
		r := twoQuestions("m")
		r.State = json.RawMessage(fmt.Sprintf("%q", s))
		return r
	}
	for _, s := range []string{"red", "green", "red", "blue"} { // green is the least recently used when blue comes
		ask(t, svc, about(s))
	}
	if c.Len() != 2 {
		t.Errorf("%d entries in a cache of 2", c.Len())
	}
	for _, w := range []struct {
		state, cache string
	}{{"red", answer.CacheHit}, {"blue", answer.CacheHit}, {"green", answer.CacheMiss}} {
		if a := ask(t, svc, about(w.state)); a.Cache != w.cache {
			t.Errorf("%s: cache %q, want %q", w.state, a.Cache, w.cache)
		}
	}
}

// A request that divides out the batch prior, a running mean every
// answer moves, is never stored: each repeat asks the engine.
func TestCacheBypassesTheBatchPrior(t *testing.T) {
	for _, c := range []struct {
		name   string
		router fleet.Prior
		asked  string
	}{
		{"configured", fleet.Prior{Mode: decision.PriorBatch}, ""},
		{"asked for", fleet.Prior{}, decision.PriorBatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, f := fakeNode(t, "n", fakeengine.Behavior{})
			cache := answer.NewCache(16, time.Hour)
			svc := answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{Prior: c.router}), Cache: cache})
			req := twoQuestions("m")
			req.Prior = c.asked
			for range 2 {
				if a := ask(t, svc, req); a.Cache != answer.CacheBypass {
					t.Errorf("cache %q", a.Cache)
				}
			}
			if n := len(f.Inferences()); n != 4 || cache.Bypassed() != 2 || cache.Len() != 0 {
				t.Errorf("%d engine calls for two requests of two questions; %d bypassed, %d kept", n, cache.Bypassed(), cache.Len())
			}
		})
	}
}

// A failure is never stored: once the engine answers (here, after
// refusing the request), the request is asked again; and a model no node serves is the fleet's failure, not
// the cache's.
func TestCacheKeepsNoFailure(t *testing.T) {
	svc, f, c := cachedService(t, 16, time.Hour, nil)
	f.Set(fakeengine.Behavior{Fault: fakeengine.Status, Status: 422})
	if _, err := svc.Answer(t.Context(), twoQuestions("m")); err == nil {
		t.Fatal("a node answering 422 answered")
	}
	f.Set(fakeengine.Behavior{})
	if a := ask(t, svc, twoQuestions("m")); a.Cache != answer.CacheMiss {
		t.Errorf("after a failure: cache %q", a.Cache)
	}
	_, err := svc.Answer(t.Context(), twoQuestions("nope"))
	if f, ok := err.(*answer.Failure); !ok || f.Class != answer.UnknownModel {
		t.Errorf("unknown model: %v", err)
	}
	if c.Hits() != 0 || c.Misses() != 1 {
		t.Errorf("hits %d, misses %d", c.Hits(), c.Misses())
	}
}

// Many callers at once over a few states: every answer of a state is
// the same, each caller misses a state at most once, and the counts add
// up. Run with -race.
func TestCacheConcurrentCallers(t *testing.T) {
	svc, _, c := cachedService(t, 64, time.Hour, nil)
	const callers, each, states = 16, 40, 4
	var mu sync.Mutex
	seen := map[string]decision.Distribution{}
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				req := twoQuestions("m")
				s := fmt.Sprintf("state %d", (g+i)%states)
				req.State = json.RawMessage(fmt.Sprintf("%q", s))
				a, err := svc.Answer(t.Context(), req)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if d, ok := seen[s]; ok && !same(d, a.Questions[0].Dist) {
					t.Errorf("%s: %v, before %v", s, a.Questions[0].Dist, d)
				}
				seen[s] = a.Questions[0].Dist
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Identical requests in flight wait for the first: each state is
	// asked once.
	if h, m := c.Hits(), c.Misses(); h+m != callers*each || m != states {
		t.Errorf("hits %d, misses %d for %d requests over %d states", h, m, callers*each, states)
	}
}

// A model swapped under the same name on a node, seen by the node's
// fingerprint, is a miss: an answer of the old build is never replayed
// for the new one, and the new build's answer carries its fingerprint.
func TestCacheMissesAcrossASwappedBuild(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"m"}, Build: "one", Behavior: fakeengine.Behavior{Prompted: fakeengine.Leaning}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{"m"}, Timeout: config.Duration(5 * time.Second)},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	r := fleet.New([]*fleet.Node{n}, fleet.Options{Fingerprint: fleet.FingerprintOptions{Log: slog.New(slog.DiscardHandler)}})
	svc := answer.New(answer.Options{Router: r, Cache: answer.NewCache(16, time.Hour)})
	r.Probe(t.Context())
	req := twoQuestions("m")
	first := ask(t, svc, req)
	if got := ask(t, svc, req); got.Cache != answer.CacheHit {
		t.Fatalf("a repeat of the first build: cache %q", got.Cache)
	}
	f.SetBuild("two")
	r.Probe(t.Context())
	got := ask(t, svc, req)
	if got.Cache != answer.CacheMiss || got.Questions[0].Fingerprint == first.Questions[0].Fingerprint || got.Questions[0].Fingerprint != n.Fingerprint("m") {
		t.Fatalf("after the swap: cache %q, fingerprint %q (first %q)", got.Cache, got.Questions[0].Fingerprint, first.Questions[0].Fingerprint)
	}
}

// lockedRecords is records for concurrent callers.
type lockedRecords struct {
	mu  sync.Mutex
	ids map[string]int // records by request id
}

func (r *lockedRecords) Record(rec decisionlog.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[rec.RequestID]++
}

// heldService is cachedService over an engine that holds every call
// until release is called, counting the calls that arrived in held. A
// request's questions are asked one after another (llama.cpp: one slot
// a state), so a held request has one call in the engine.
func heldService(t *testing.T, rec answer.Recorder) (svc *answer.Service, c *answer.Cache, release func(), held *atomic.Int64) {
	t.Helper()
	gate, held := make(chan struct{}), &atomic.Int64{}
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	n, _ := fakeNode(t, "n", fakeengine.Behavior{Prompted: func(r fakeengine.Request) []float64 {
		held.Add(1)
		<-gate
		return fakeengine.Leaning(r)
	}})
	t.Cleanup(release) // before the engine closes: it waits for its handlers
	c = answer.NewCache(16, time.Hour)
	svc = answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{}), Cache: c, Recorder: rec})
	return svc, c, release, held
}

// waitFor polls cond for up to a minute: a bound on a wait, not a timing
// claim.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
	}
}

// Identical requests arriving while the first is asked wait for its
// answer: the engine is asked once, the rest are hits, each recorded
// under its own request id.
func TestCacheCoalescesIdenticalRequests(t *testing.T) {
	rec := &lockedRecords{ids: map[string]int{}}
	svc, c, release, held := heldService(t, rec)
	const callers = 8
	got := make([]*answer.Answer, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Go(func() {
			req := twoQuestions("m")
			req.RequestID = fmt.Sprintf("req_%d", i)
			got[i], errs[i] = svc.Answer(t.Context(), req)
		})
	}
	start(0)
	waitFor(t, "engine call", func() bool { return held.Load() > 0 })
	for i := 1; i < callers; i++ {
		start(i)
	}
	waitFor(t, "coalesced callers", func() bool { return c.Coalesced() == callers-1 })
	release()
	wg.Wait()
	misses := 0
	for i, a := range got {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if a.Cache == answer.CacheMiss {
			misses++
		}
		if !same(a.Questions[0].Dist, got[0].Questions[0].Dist) {
			t.Errorf("caller %d: %v, the first %v", i, a.Questions[0].Dist, got[0].Questions[0].Dist)
		}
	}
	// One request's engine calls: one a question (debias off).
	if calls := held.Load(); calls != 2 || misses != 1 || got[0].Cache != answer.CacheMiss || c.Hits() != callers-1 || c.Misses() != 1 {
		t.Errorf("%d engine calls, %d misses (the first %q); cache hits %d, misses %d", calls, misses, got[0].Cache, c.Hits(), c.Misses())
	}
	for i := range callers {
		if n := rec.ids[fmt.Sprintf("req_%d", i)]; n != 2 {
			t.Errorf("req_%d has %d records, want one a question", i, n)
		}
	}
}

// A failure is not shared: when the request waited for fails (here its
// caller gave up), those waiting ask for themselves, at once.
func TestCacheCoalescedFailureIsNotShared(t *testing.T) {
	svc, c, release, held := heldService(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan error, 1)
	go func() {
		_, err := svc.Answer(ctx, twoQuestions("m"))
		first <- err
	}()
	waitFor(t, "the first request's engine call", func() bool { return held.Load() == 1 })
	const waiting = 4
	got := make([]*answer.Answer, waiting)
	errs := make([]error, waiting)
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Go(func() { got[i], errs[i] = svc.Answer(t.Context(), twoQuestions("m")) })
	}
	waitFor(t, "coalesced callers", func() bool { return c.Coalesced() == waiting })
	cancel()
	if err := <-first; err == nil {
		t.Fatal("the request whose caller gave up was answered")
	}
	// Those waiting ask for themselves now, together, before any is
	// answered: the engine holds every call.
	waitFor(t, "the waiting callers' own engine calls", func() bool { return held.Load() == 1+waiting })
	release()
	wg.Wait()
	for i := range waiting {
		if errs[i] != nil || got[i].Cache != answer.CacheMiss {
			t.Errorf("caller %d: %v, cache %v", i, errs[i], got[i])
		}
	}
}
