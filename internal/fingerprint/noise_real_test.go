package fingerprint_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"system1/internal/engine"
	"system1/internal/engine/llamacpp"
	"system1/internal/engine/ollama"
	"system1/internal/fingerprint"
	"system1/internal/testengine"
)

// The noise test on a real engine (docs/fingerprints.md, "The noise
// test, measured on real engines"): the canary read again and again from
// one build beside clients asking other states, is held by a Tracker to
// the repeat noise it measures from those reads; a re-quantization of the
// same weights under the same name is caught by the canary alone.

// loadClients is how many clients keep the engine busy beside the canary:
// few, as the machines these run on are small and shared.
const loadClients = 2

// measuredReads is how many canaries a false-alarm measurement reads:
// SYSTEM1_MEASURE_READS, 1,000 unless set.
func measuredReads(t *testing.T) int {
	t.Helper()
	s := os.Getenv("SYSTEM1_MEASURE_READS")
	if s == "" {
		return 1000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("SYSTEM1_MEASURE_READS=%q: want a count of canaries", s)
	}
	return n
}

// busy keeps k clients asking other states of model until stop is called;
// it returns once every client has had an answer, so that the load is
// running whatever the engine's speed. Answers that fail are counted in
// failed.
func busy(e engine.Engine, model string, k int, failed *atomic.Int64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg, started sync.WaitGroup
	started.Add(k)
	for i := range k {
		wg.Go(func() {
			q := fingerprint.Questions()[1]
			for n := 0; ctx.Err() == nil; n++ {
				state := json.RawMessage(fmt.Sprintf(`{"ticket":"load %d from client %d: the invoice shows the wrong address"}`, n, i))
				// An uninformative answer ran the model all the same.
				if _, err := engine.Ask(ctx, e, model, state, q); err != nil && !engine.Classify(err).Uninformative && ctx.Err() == nil {
					failed.Add(1)
				}
				if n == 0 {
					started.Done()
				}
			}
		})
	}
	started.Wait()
	return func() { cancel(); wg.Wait() }
}

func readCanary(t *testing.T, e engine.Engine, model string) fingerprint.Reading {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, _, err := engine.ReadCanary(ctx, e, model)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// falseAlarms reads the canary of one build from readers concurrent
// readers, each its own key of one Tracker with the noise test (the
// canary alone, so that only the noise test and the tolerance speak), as
// processes reading one node: each reads once quiet, as a process
// starting beside an idle engine takes its reference, and then beside
// loadClients busy clients and the other readers, n reads in all. It
// fails on any alarm, logs the count every 50 reads and a row of the
// false-alarm table at the end, and returns the tracker and the first
// reader's key.
func falseAlarms(t *testing.T, eng, build string, e engine.Engine, model string, n, readers int) (*fingerprint.Tracker, fingerprint.Key) {
	t.Helper()
	tr := fingerprint.NewTracker()
	tr.NoiseTest = true
	key := func(r int) fingerprint.Key {
		return fingerprint.Key{Node: fmt.Sprintf("%s reader %d", eng, r), Model: model}
	}
	for r := range readers {
		tr.Observe(key(r), fingerprint.Print{Canary: readCanary(t, e, model)}, 0)
	}
	var failed atomic.Int64
	stop := busy(e, model, loadClients, &failed)
	defer stop()
	var (
		mu                             sync.Mutex
		reads, alarms, suspect, tested int
		pooled                         int // runs of Confirm suspect reads tested as one
		worst, worstPooled             float64
		wg                             sync.WaitGroup
	)
	for r := range readers {
		wg.Go(func() {
			for range n / readers {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				reading, _, err := engine.ReadCanary(ctx, e, model)
				cancel()
				if err != nil {
					t.Errorf("%s, reader %d: %v", eng, r, err)
					return
				}
				c := tr.Observe(key(r), fingerprint.Print{Canary: reading}, 0)
				mu.Lock()
				reads++
				if c.Changed {
					alarms++
					t.Errorf("%s, %s: reader %d's read %d alarmed: %s (z %.2f, limit %.2f, sigma %.3g, delta %.3g)",
						eng, build, r, reads, c, c.Z, c.ZLimit, c.Sigma, c.Delta)
				}
				if c.Suspect > 0 && !c.Changed {
					suspect++
				}
				switch {
				case c.Suspect == fingerprint.Confirm:
					pooled++
					worstPooled = max(worstPooled, c.Z/c.ZLimit)
				case c.Tested:
					tested++
					worst = max(worst, c.Z/c.ZLimit)
				}
				if reads%50 == 0 {
					t.Logf("%s, %s: %d reads: %d alarms, %d suspect reads not confirmed, largest z / limit %.2f, %d pooled tests, largest %.2f (%s)",
						eng, build, reads, alarms, suspect, worst, pooled, worstPooled, time.Now().UTC().Format(time.DateTime))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Errorf("%s: %d of the load's requests failed", eng, f)
	}
	var noise []string
	for r := range readers {
		noise = append(noise, fmt.Sprintf("%.3g", tr.Noise(key(r)).Sigma()))
	}
	t.Logf("| %s | %s | %d by %d readers beside %d busy clients | %d | %d | %d (largest %.2f of the limit) | %d | %s | %.2f |",
		eng, build, reads, readers, loadClients, tested, suspect, pooled, worstPooled, alarms, strings.Join(noise, ", "), worst)
	return tr, key(0)
}

// Repeat reads of one build never alarm: the canary read measuredReads
// times beside a busy engine, after a quiet first read. A measurement of
// hours on a small machine, run with SYSTEM1_MEASURE=1.
func TestNoiseFalseAlarmsOnLlamaServer(t *testing.T) {
	if os.Getenv("SYSTEM1_MEASURE") == "" {
		t.Skip("a measurement of hours: set SYSTEM1_MEASURE=1 (and SYSTEM1_LLAMA_SERVER) to run it")
	}
	needs(t, "SYSTEM1_LLAMA_SERVER")
	s := testengine.StartWith(t, testengine.Config{Alias: alias, Slots: 4})
	falseAlarms(t, "llama-server", "stories260K (F32), 4 slots", &llamacpp.Engine{BaseURL: s.URL}, alias, measuredReads(t), 2)
}

// The same on Ollama, 4 parallel requests.
func TestNoiseFalseAlarmsOnOllama(t *testing.T) {
	if os.Getenv("SYSTEM1_MEASURE") == "" {
		t.Skip("a measurement of hours: set SYSTEM1_MEASURE=1 (and SYSTEM1_OLLAMA) to run it")
	}
	needs(t, "SYSTEM1_OLLAMA")
	o := testengine.StartOllamaWith(t, testengine.OllamaConfig{Parallel: 4})
	falseAlarms(t, "ollama", "stories260K (F32), 4 parallel", &ollama.Engine{BaseURL: o.URL}, testengine.OllamaModel, measuredReads(t), 2)
}

// The same random-weight GGUF at F16 and at Q8_0 (gguf-py's quantizer)
// under one name and one path: the canary, having learnt the node's
// noise from repeat reads of the F16 build, catches the Q8_0 build alone
// within a few reads. llama-server's identity changes only in what it
// reports of the file's type and size.
func TestRequantizedUnderOneNameOnLlamaServer(t *testing.T) {
	// Twenty canaries and more: a measurement for docs/fingerprints.md,
	// minutes long, not a check for every run of the suite.
	if os.Getenv("SYSTEM1_MEASURE") == "" {
		t.Skip("a measurement of minutes: set SYSTEM1_MEASURE=1 (and SYSTEM1_LLAMA_SERVER) to run it")
	}
	needs(t, "SYSTEM1_LLAMA_SERVER")
	f16, q8 := testengine.RandomModels(t, 1)[0], testengine.RandomQ8(t, 1)
	served := filepath.Join(t.TempDir(), "model.gguf")
	copyFile(t, f16, served)
	s := testengine.StartWith(t, testengine.Config{Model: served, Alias: alias, Slots: 4})
	e := &llamacpp.Engine{BaseURL: s.URL}
	identity := func() fingerprint.Identity {
		t.Helper()
		id, err := e.Identity(context.Background(), alias)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	was := identity()
	tr, k := falseAlarms(t, "llama-server", "random-1 F16, 4 slots", e, alias, 20, 1)

	copyFile(t, q8, served)
	s.Restart(t, testengine.Config{})
	e = &llamacpp.Engine{BaseURL: s.URL}
	fields := fingerprint.Compare(fingerprint.Print{Identity: was}, fingerprint.Print{Identity: identity()}, 0).Fields
	if want := []string{"meta.ftype", "meta.size", "model_ftype"}; fmt.Sprint(fields) != fmt.Sprint(want) {
		t.Errorf("llama-server's identity of the Q8_0 build under the F16 build's path differs in %v, want %v", fields, want)
	}
	var failed atomic.Int64
	stop := busy(e, alias, loadClients, &failed) // the Q8_0 build is read beside load too
	defer stop()
	const few = fingerprint.Confirm + 2
	for i := 1; ; i++ {
		c := tr.Observe(k, fingerprint.Print{Canary: readCanary(t, e, alias)}, 0)
		t.Logf("Q8_0 read %d: %s (delta %.3g against tolerance %.3g; z %.1f, limit %.1f, sigma %.3g); the identity differs in %v",
			i, c, c.Delta, c.Tolerance, c.Z, c.ZLimit, c.Sigma, fields)
		if c.Changed {
			break
		}
		if i == few {
			t.Fatalf("the Q8_0 build was not caught by the canary in %d reads", few)
		}
	}
}

// Near ties carry no more evidence of a change of build than confident
// questions: for each pair of builds of one model, twelve reads of each
// beside load, and per canary question its margin (its two likeliest
// options' difference in the first build), the RMS move of its mean
// log-probabilities from one build to the other, and its repeat noise.
// A measurement for docs/fingerprints.md, reported and not held.
func TestNearTiesAndTheMoveOfABuild(t *testing.T) {
	if os.Getenv("SYSTEM1_MEASURE") == "" {
		t.Skip("a measurement of minutes: set SYSTEM1_MEASURE=1 (and SYSTEM1_LLAMA_SERVER) to run it")
	}
	needs(t, "SYSTEM1_LLAMA_SERVER")
	pairs := []struct{ name, from, to string }{
		{"random-1 F16 to Q8_0", testengine.RandomModels(t, 1)[0], testengine.RandomQ8(t, 1)},
		{"random-2 F16 to Q8_0", testengine.RandomModels(t, 2)[0], testengine.RandomQ8(t, 2)},
		{"stories260K F32 to F16", testengine.ModelPath(), testengine.StoriesF16(t)},
	}
	const reads = 12
	for _, p := range pairs {
		served := filepath.Join(t.TempDir(), "model.gguf")
		copyFile(t, p.from, served)
		s := testengine.StartWith(t, testengine.Config{Model: served, Alias: alias, Slots: 4})
		readBuild := func() []fingerprint.Reading {
			e := &llamacpp.Engine{BaseURL: s.URL}
			var failed atomic.Int64
			stop := busy(e, alias, loadClients, &failed)
			defer stop()
			rs := make([]fingerprint.Reading, reads)
			for i := range rs {
				rs[i] = readCanary(t, e, alias)
			}
			return rs
		}
		from := readBuild()
		copyFile(t, p.to, served)
		s.Restart(t, testengine.Config{})
		to := readBuild()
		t.Logf("%s, %d reads of each beside %d clients: question, margin, move (RMS of the mean log-probabilities' change), repeat noise (SD of a read's log-probabilities)", p.name, reads, loadClients)
		moves := questionMoves(from, to)
		for _, q := range moves {
			t.Logf("  %-9s %.3f  %.2e  %.2e", q.id, q.margin, q.move, q.noise)
		}
		near, wide := medianMove(moves[:4]), medianMove(moves[len(moves)-4:])
		t.Logf("%s: rank correlation of move with margin %.2f; median move of the 4 nearest ties %.2g, of the 4 widest margins %.2g",
			p.name, rankCorrelation(moves), near, wide)
	}
}

// rankCorrelation is Spearman's rank correlation of the moves with the
// margins, by which moves is sorted (ties ranked in order).
func rankCorrelation(moves []questionMove) float64 {
	byMove := slices.Clone(moves)
	slices.SortStableFunc(byMove, func(a, b questionMove) int { return cmp.Compare(a.move, b.move) })
	n := float64(len(moves))
	var d2 float64
	for i, q := range moves {
		d := float64(i - slices.Index(byMove, q))
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// medianMove is the median of the moves.
func medianMove(moves []questionMove) float64 {
	m := make([]float64, len(moves))
	for i, q := range moves {
		m[i] = q.move
	}
	slices.Sort(m)
	if len(m)%2 == 1 {
		return m[len(m)/2]
	}
	return (m[len(m)/2-1] + m[len(m)/2]) / 2
}

type questionMove struct {
	id                  string
	margin, move, noise float64
}

// questionMoves measures each canary question answered in every read,
// sorted by margin.
func questionMoves(from, to []fingerprint.Reading) []questionMove {
	logs := func(rs []fingerprint.Reading, q, j int) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = math.Log(max(r.Dists[q][j], fingerprint.MinProb))
		}
		return out
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	var out []questionMove
	for q, question := range fingerprint.Questions() {
		answered := func(rs []fingerprint.Reading) bool {
			return !slices.ContainsFunc(rs, func(r fingerprint.Reading) bool { return len(r.Dists[q]) == 0 })
		}
		if !answered(from) || !answered(to) {
			continue
		}
		var move, noise float64
		k := len(from[0].Dists[q])
		for j := range k {
			a, b := logs(from, q, j), logs(to, q, j)
			ma, mb := mean(a), mean(b)
			move += (ma - mb) * (ma - mb)
			for _, x := range a {
				noise += (x - ma) * (x - ma)
			}
			for _, x := range b {
				noise += (x - mb) * (x - mb)
			}
		}
		top := slices.Sorted(slices.Values(from[0].Dists[q]))
		out = append(out, questionMove{
			id:     question.ID,
			margin: top[k-1] - top[k-2],
			move:   math.Sqrt(move / float64(k)),
			noise:  math.Sqrt(noise / float64(k*(len(from)+len(to)-2))),
		})
	}
	slices.SortFunc(out, func(a, b questionMove) int { return cmp.Compare(a.margin, b.margin) })
	return out
}
