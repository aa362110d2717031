package fleet

import (
	"bytes"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fingerprint"
)

// The canary has power against the node's own noise: with canary_every
// 2s, the same weights re-quantized (every logit moved by a fixed
// pseudo-random amount of up to 0.02 per prompt and label, every identity
// field unchanged, the canary moving less than the tolerance) are caught
// within a few canaries, by the noise test and not the tolerance, with
// or without the engine's own per-call noise; that noise alone (up to
// 0.002 per logit, fresh on every call) never alarms over 300 canaries.
// Each canary costs one engine call a question. The clock is the test's:
// no canary waits for the wall clock.
func TestCanaryPower(t *testing.T) {
	const quiet = 300 // canaries of an unchanged build
	for _, tc := range []struct {
		name   string
		jitter float64
	}{
		{"a batch-noisy engine", 0.002},
		{"a bit-exact engine", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one", Behavior: fakeengine.Behavior{Jitter: tc.jitter}})
			t.Cleanup(f.Close)
			n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel},
				Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
			if err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			obs := &printObserver{calls: map[string]int{}, changes: map[string]int{}}
			r := New([]*Node{n}, Options{Observer: obs, Fingerprint: FingerprintOptions{CanaryEvery: 2 * time.Second, NoiseTest: true,
				Log: slog.New(slog.NewTextHandler(&logged, nil))}})
			clock := &lockedClock{t: time.Unix(1e9, 0)}
			r.now = clock.now
			key := "n/" + fakeengine.DefaultModel
			canary := func() Fingerprint {
				t.Helper()
				clock.advance(2 * time.Second)
				r.Probe(t.Context())
				fs := n.State(r.now()).Fingerprints
				if len(fs) != 1 || fs[0].Error != "" {
					t.Fatalf("fingerprints %+v", fs)
				}
				return fs[0]
			}

			first := canary()
			if calls, q := obs.count(obs.calls, key+"/ok"), len(fingerprint.Questions()); calls != q {
				t.Fatalf("a canary made %d engine calls, want one for each of its %d questions", calls, q)
			}
			for i := range quiet {
				if s := canary(); s.Changes != 0 || s.ID != first.ID {
					t.Fatalf("canary %d of an unchanged build alarmed: %+v\n%s", i+2, s, logged.String())
				}
			}
			if noise := r.prints.tracker.Noise(fingerprint.Key{Node: "n", Model: fakeengine.DefaultModel}); !noise.Measured() {
				t.Fatalf("noise %+v after %d canaries: not measured", noise, quiet+1)
			}

			f.Set(fakeengine.Behavior{Jitter: tc.jitter, Shift: 0.02, ShiftSeed: 7})
			for i := 1; ; i++ {
				s := canary()
				if s.Changes == 0 {
					if i == 3 {
						t.Fatalf("the re-quantized weights went unseen for %d canaries", i)
					}
					continue
				}
				if s.Changes != 1 || s.ID == first.ID || !strings.Contains(s.Change, "times the node's repeat noise") || obs.count(obs.changes, key) != 1 {
					t.Fatalf("after %d canaries of the re-quantized weights: %+v (first %s)", i, s, first.ID)
				}
				t.Logf("caught at canary %d after the shift: %s", i, s.Change)
				break
			}
		})
	}
}

// Two processes name one build alike through the builds file: the second
// reads the build a little otherwise (a value on the other side of an
// edge of the tolerance's grid, as a busy engine's batches move it) and,
// knowing the first's build, takes its id; without the file it names the
// build anew. Other weights are another build in both.
func TestBuildsFileNamesOneBuildAlike(t *testing.T) {
	skew := func(first float64) fakeengine.Behavior {
		return fakeengine.Behavior{Logprobs: func(labels []string) []float64 {
			lp := make([]float64, len(labels))
			for i := range lp {
				lp[i] = math.Log((1 - first) / float64(len(labels)-1))
			}
			lp[0] = math.Log(first)
			return lp
		}}
	}
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Build: "one"})
	t.Cleanup(f.Close)
	file := BuildsFile{Path: filepath.Join(t.TempDir(), "builds.json")}
	// process probes the fake once as a new process would and returns
	// the id it names the build by.
	process := func(store BuildStore) string {
		t.Helper()
		n, err := NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel},
			Timeout: config.Duration(5 * time.Second)}, func(string) string { return "" }, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := New([]*Node{n}, Options{Fingerprint: FingerprintOptions{Builds: store, Log: slog.New(slog.DiscardHandler)}})
		r.Probe(t.Context())
		return n.Fingerprint(fakeengine.DefaultModel)
	}
	f.Set(skew(0.61 - 1e-6))
	first := process(file)
	f.Set(skew(0.61 + 1e-6)) // the same build, read across the grid's edge at 0.61
	if alone := process(nil); alone == first {
		t.Fatalf("without the builds file the second reading was named %s too: the test shows nothing", alone)
	}
	if second := process(file); second != first {
		t.Errorf("the second process named the build %s, the first %s", second, first)
	}
	f.Set(skew(0.7))
	if other := process(file); other == first {
		t.Errorf("other weights named %s, the first build's id", other)
	}
	bs, err := file.Load()
	if err != nil || len(bs) != 2 {
		t.Errorf("the builds file holds %d builds (%v), want the two seen", len(bs), err)
	}

	// A file that is not a builds file is said and replaced: the process
	// names builds by its own reading meanwhile.
	broken := BuildsFile{Path: filepath.Join(t.TempDir(), "builds.json")}
	if err := os.WriteFile(broken.Path, []byte("<html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Load(); err == nil || !strings.Contains(err.Error(), broken.Path) {
		t.Errorf("Load of a file that is not JSON: %v, want an error naming it", err)
	}
	if id := process(broken); id == "" {
		t.Error("a broken builds file left the build unnamed")
	}
	if bs, err := broken.Load(); err != nil || len(bs) != 1 {
		t.Errorf("the broken file after a build was named: %d builds, %v", len(bs), err)
	}
}
