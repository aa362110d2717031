package fingerprint_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"system1/internal/decision"
	"system1/internal/decisionsapi"
	"system1/internal/fingerprint"
	"system1/internal/systemone"
)

// tail are the distributions of the canary's questions after its first
// three, which the tests here leave as they are; two decimals, so that
// they neither make a reading unrounded nor round it coarser.
var tail = []decision.Distribution{{0.7, 0.3}, {0.7, 0.3}, {0.7, 0.3}, {0.7, 0.3}, {0.7, 0.3},
	{0.4, 0.3, 0.2, 0.1}, {0.5, 0.3, 0.2}, {0.1, 0.2, 0.3, 0.4}, {0.8, 0.2}}

// pad gives the first three questions' distributions the tail, or, when
// all three are uninformative, an uninformative tail.
func pad(dists ...decision.Distribution) []decision.Distribution {
	out := slices.Clone(dists)
	if !slices.ContainsFunc(dists, func(d decision.Distribution) bool { return d != nil }) {
		return append(out, make([]decision.Distribution, len(tail))...)
	}
	for _, d := range tail {
		out = append(out, slices.Clone(d))
	}
	return out
}

func reading(t *testing.T, model string, dists ...decision.Distribution) fingerprint.Reading {
	t.Helper()
	if len(dists) == 3 {
		dists = pad(dists...)
	}
	r, err := fingerprint.NewReading(dists, model)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	noul    = decision.Distribution{0.6, 0.4}
	choice  = decision.Distribution{0.4, 0.3, 0.2, 0.1}
	score   = decision.Distribution{0.5, 0.3, 0.2}
	choice2 = decision.Distribution{0.43, 0.27, 0.2, 0.1}
)

func TestNewReadingChecksTheCanary(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dists []decision.Distribution
	}{
		{"too few", pad(noul, choice, score)[1:]},
		{"too many", append(pad(noul, choice, score), score)},
		{"wrong options", pad(noul, score, score)},
		{"not a distribution", pad(decision.Distribution{0.6, 0.6}, choice, score)},
		{"NaN", pad(decision.Distribution{math.NaN(), 1}, choice, score)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fingerprint.NewReading(tc.dists, "m"); !errors.Is(err, fingerprint.ErrReading) {
				t.Fatalf("err %v, want ErrReading", err)
			}
		})
	}
	in := []decision.Distribution{{0.6, 0.4}, nil, score}
	r := reading(t, "m", in...)
	in[0][0] = 0.9 // the reading keeps its own copy
	if r.Dists[0][0] != 0.6 || r.Dists[1] != nil || !r.Read() {
		t.Fatalf("reading %+v", r)
	}
	if blind := reading(t, "", nil, nil, nil); !blind.Read() || blind.Step != 0 {
		t.Fatalf("a reading uninformative everywhere: %+v", blind)
	}
}

// A reading whose values are all whole hundredths is taken as rounded to
// two decimals (Jev's answers), and the step widens the tolerance.
func TestStepOfRoundedReadings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dists []decision.Distribution
		want  float64
	}{
		{"two decimals", []decision.Distribution{noul, choice, score}, 0.01},
		{"three decimals", []decision.Distribution{{0.605, 0.395}, choice, score}, 0.001},
		{"unrounded", []decision.Distribution{{0.6049182, 0.3950818}, choice, score}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reading(t, "m", tc.dists...).Step; got != tc.want {
				t.Errorf("step %v, want %v", got, tc.want)
			}
		})
	}
	a, b := reading(t, "m", noul, choice, score), reading(t, "m", noul, decision.Distribution{0.385, 0.315, 0.2, 0.1}, score)
	if c := fingerprint.Compare(fingerprint.Print{Canary: a}, fingerprint.Print{Canary: b}, 0.01); c.Changed || c.Tolerance != 0.02 {
		t.Errorf("a rounded reading 0.015 away with tolerance 0.01 and step 0.01: %+v", c)
	}
}

func TestDelta(t *testing.T) {
	base := reading(t, "m", noul, choice, score)
	for _, tc := range []struct {
		name string
		a, b fingerprint.Reading
		want float64
	}{
		{"same", base, base, 0},
		{"one option moved", base, reading(t, "m", noul, choice2, score), 0.03},
		{"uninformative in one", base, reading(t, "m", noul, nil, score), 1},
		{"uninformative in both", reading(t, "m", nil, choice, score), reading(t, "m", nil, choice, score), 0},
		{"not read", base, fingerprint.Reading{}, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fingerprint.Delta(tc.a, tc.b)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-12) {
				t.Fatalf("delta %v, want %v", got, tc.want)
			}
			if back := fingerprint.Delta(tc.b, tc.a); !(back == got || math.IsNaN(back) && math.IsNaN(got)) {
				t.Fatalf("delta is not symmetric: %v and %v", got, back)
			}
		})
	}
}

func id(kv ...string) fingerprint.Identity {
	f := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		f[kv[i]] = kv[i+1]
	}
	return fingerprint.Identity{Source: "test", Fields: f}
}

func TestCompare(t *testing.T) {
	r := reading(t, "m-1", noul, choice, score)
	moved := reading(t, "m-1", noul, choice2, score)
	near := reading(t, "m-1", noul, decision.Distribution{0.405, 0.295, 0.2, 0.1}, score)
	for _, tc := range []struct {
		name      string
		ref, next fingerprint.Print
		fields    []string
		moved     bool
	}{
		{"the same", fingerprint.Print{id("digest", "a"), r}, fingerprint.Print{id("digest", "a"), r}, nil, false},
		{"a field changed", fingerprint.Print{id("digest", "a", "size", "1"), r}, fingerprint.Print{id("digest", "b", "size", "1"), r}, []string{"digest"}, false},
		{"a field appeared", fingerprint.Print{id("digest", "a"), r}, fingerprint.Print{id("digest", "a", "version", "2"), r}, []string{"version"}, false},
		{"identity unknown now", fingerprint.Print{id("digest", "a"), r}, fingerprint.Print{fingerprint.Identity{}, r}, nil, false},
		{"the canary moved", fingerprint.Print{id("digest", "a"), r}, fingerprint.Print{id("digest", "a"), moved}, nil, true},
		{"the canary within tolerance", fingerprint.Print{id("digest", "a"), r}, fingerprint.Print{id("digest", "a"), near}, nil, false},
		{"the canary not read now", fingerprint.Print{id("digest", "a"), r}, fingerprint.Print{id("digest", "a"), fingerprint.Reading{}}, nil, false},
		{"the answered model changed", fingerprint.Print{Canary: r}, fingerprint.Print{Canary: reading(t, "m-2", noul, choice, score)}, []string{fingerprint.AnsweredModel}, false},
		{"no answered model now", fingerprint.Print{Canary: r}, fingerprint.Print{Canary: reading(t, "", noul, choice, score)}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fingerprint.Compare(tc.ref, tc.next, 0.01)
			if !slices.Equal(c.Fields, tc.fields) || c.CanaryMoved() != tc.moved || c.Changed != (tc.fields != nil || tc.moved) {
				t.Fatalf("change %+v", c)
			}
			if c.Changed == (c.String() == "unchanged") {
				t.Errorf("String() %q for changed %v", c.String(), c.Changed)
			}
		})
	}
}

func TestIDHashesTheIdentityAlone(t *testing.T) {
	r1 := reading(t, "m", noul, choice, score)
	r2 := reading(t, "m", noul, choice2, score)
	a := fingerprint.Print{Identity: id("digest", "a", "size", "1"), Canary: r1}
	if got := a.ID(); len(got) != 16 || got != (fingerprint.Print{Identity: id("size", "1", "digest", "a"), Canary: r2}).ID() {
		t.Errorf("id %q: it must not depend on the canary's values or the fields' order", got)
	}
	for _, other := range []fingerprint.Print{
		{Identity: id("digest", "b", "size", "1"), Canary: r1},
		{Identity: id("digest", "a", "size", "1"), Canary: reading(t, "m-2", noul, choice, score)},
		{Identity: id("digest", "a1", "size", ""), Canary: r1}, // the same bytes, split otherwise
		{Identity: fingerprint.Identity{Source: "other", Fields: a.Identity.Fields}, Canary: r1},
	} {
		if other.ID() == a.ID() {
			t.Errorf("%v and %v share an id", other.Identity, a.Identity)
		}
	}
	if got := (fingerprint.Print{Canary: fingerprint.Reading{}}).ID(); got != "" {
		t.Errorf("an unknown print has id %q", got)
	}
}

func TestTracker(t *testing.T) {
	tr := fingerprint.NewTracker()
	k := fingerprint.Key{Node: "n", Model: "m"}
	// Unrounded values, so that the tolerance is not widened by a step.
	unrounded := decision.Distribution{0.6123, 0.3877}
	r := reading(t, "m", unrounded, decision.Distribution{0.4013, 0.2987, 0.2, 0.1}, score)
	step := func(name string, p fingerprint.Print, changed bool) {
		t.Helper()
		if c := tr.Observe(k, p, 0); c.Changed != changed {
			t.Fatalf("%s: %+v, want changed %v", name, c, changed)
		}
	}
	step("first, the canary not read", fingerprint.Print{Identity: id("digest", "a")}, false)
	step("the canary read late joins the reference", fingerprint.Print{Identity: id("digest", "a"), Canary: r}, false)
	if ref, _ := tr.Reference(k); !ref.Canary.Read() {
		t.Fatalf("reference %+v has no canary", ref)
	}
	// A drift of 0.006 a step: each step is within the tolerance of the
	// last, but the reference stays put, so the second step is a change.
	drift := func(by float64) fingerprint.Reading {
		return reading(t, "m", unrounded, decision.Distribution{0.4013 + by, 0.2987 - by, 0.2, 0.1}, score)
	}
	step("drift 0.006", fingerprint.Print{Identity: id("digest", "a"), Canary: drift(0.006)}, false)
	step("drift 0.012", fingerprint.Print{Identity: id("digest", "a"), Canary: drift(0.012)}, true)
	step("the new build, again", fingerprint.Print{Identity: id("digest", "a"), Canary: drift(0.012)}, false)
	step("a re-tag", fingerprint.Print{Identity: id("digest", "b"), Canary: drift(0.012)}, true)
	step("the re-tag once only", fingerprint.Print{Identity: id("digest", "b"), Canary: drift(0.012)}, false)
	step("another re-tag, its canary not read", fingerprint.Print{Identity: id("digest", "c")}, true)
	if gen, ok := tr.Generation(k); !ok || gen != 3 {
		t.Fatalf("generation %d, %v after three changes", gen, ok)
	}
	if ref, _ := tr.Reference(k); ref.Canary.Read() {
		t.Fatal("the old build's canary was kept as the new build's reference")
	}
	tr.Forget(k)
	if _, ok := tr.Reference(k); ok {
		t.Fatal("a forgotten key has a reference")
	}
	if _, ok := tr.Generation(k); ok {
		t.Fatal("a forgotten key has a generation")
	}
	step("after Forget", fingerprint.Print{Identity: id("digest", "z")}, false)
}

// Each key is held to the tolerance its caller gives (a node's own, else
// the default): one move of the canary, between two tolerances, is a
// change under the tighter and none under the looser, said with the
// tolerance it was held to, and each key's BuildID is taken on its own
// grid, so that the move gives a new id under the tighter alone.
func TestTrackerTolerancePerKey(t *testing.T) {
	base := reading(t, "m", decision.Distribution{0.6123, 0.3877}, choice2, score)
	// 0.02 on the first question: over 0.01, under 0.05, and within one
	// cell of 0.05's grid (12 and 7 both times) but not of 0.01's.
	moved := reading(t, "m", decision.Distribution{0.6323, 0.3677}, choice2, score)
	if base.Step != 0 || moved.Step != 0 {
		t.Fatalf("steps %v, %v: unrounded readings, so that no step widens the tolerance", base.Step, moved.Step)
	}
	tr := fingerprint.NewTracker()
	for _, tc := range []struct {
		node    string
		tol     float64
		held    float64 // the tolerance the change says
		changed bool
	}{
		{"default", 0, fingerprint.DefaultTolerance, true},
		{"tight", 0.01, 0.01, true},
		{"loose", 0.05, 0.05, false},
		{"looser", 0.3, 0.3, false},
	} {
		t.Run(tc.node, func(t *testing.T) {
			k := fingerprint.Key{Node: tc.node, Model: "m"}
			before := fingerprint.Print{Identity: id("digest", "a"), Canary: base}
			if c := tr.Observe(k, before, tc.tol); c.Changed || c.Tolerance != tc.held {
				t.Fatalf("first observation: %+v, want no change held to %v", c, tc.held)
			}
			was, _ := tr.Reference(k)
			c := tr.Observe(k, fingerprint.Print{Identity: id("digest", "a"), Canary: moved}, tc.tol)
			if c.Changed != tc.changed || c.Tolerance != tc.held || math.Abs(c.Delta-0.02) > 1e-12 {
				t.Fatalf("the canary moved by 0.02: %+v, want changed %v held to %v", c, tc.changed, tc.held)
			}
			if said := fmt.Sprintf("(tolerance %.4g)", tc.held); tc.changed != strings.Contains(c.String(), said) {
				t.Errorf("change %q, want %q in it: %v", c, said, tc.changed)
			}
			now, _ := tr.Reference(k)
			if gotNew := was.BuildID(tc.tol) != now.BuildID(tc.tol); gotNew != tc.changed {
				t.Errorf("BuildID %s then %s under tolerance %v: a new id %v, want %v", was.BuildID(tc.tol), now.BuildID(tc.tol), tc.tol, gotNew, tc.changed)
			}
			// The grid is the tolerance: the two readings share a cell of
			// the looser grid and not of the tighter.
			a, b := fingerprint.Print{Canary: base}, fingerprint.Print{Canary: moved}
			if same := a.BuildID(tc.tol) == b.BuildID(tc.tol); same == tc.changed {
				t.Errorf("BuildIDs of the two readings on the grid of %v: the same %v, want %v", tc.tol, same, !tc.changed)
			}
		})
	}
	if gen, _ := tr.Generation(fingerprint.Key{Node: "loose", Model: "m"}); gen != 0 {
		t.Errorf("the loose key saw %d changes, want 0: another key's tolerance applied", gen)
	}
}

// The canary goes over the wires as it is: System One's and Decisions'
// requests carry its questions, and System One's parser reads back the
// same questions (a score's levels with their legends).
func TestCanaryCrossesTheWires(t *testing.T) {
	req := fingerprint.Request("jev")
	p := systemone.ParseRequest(systemone.AppendRequest(nil, req))
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatal(ps)
	}
	if len(p.Questions) != len(req.Questions) {
		t.Fatalf("%d questions back", len(p.Questions))
	}
	for i, q := range p.Questions {
		want := req.Questions[i]
		if q.ID != want.ID || q.Kind != want.Kind || string(q.Instructions) != string(want.Instructions) || len(q.Options) != len(want.Options) {
			t.Fatalf("question %d: %+v, want %+v", i, q, want)
		}
		for j, o := range q.Options {
			w := want.Options[j]
			if o.Key != w.Key || o.Name != w.Name || string(o.Text) != string(w.Text) || string(o.Legend) != string(w.Legend) {
				t.Errorf("question %s option %d: %+v, want %+v", q.ID, j, o, w)
			}
		}
	}
	if body := string(decisionsapi.AppendRequest(nil, req)); !strings.Contains(body, `"name":"urgency"`) || !strings.Contains(body, `"levels"`) {
		t.Errorf("decisions request %s", body)
	}
	// Questions hands out copies.
	qs := fingerprint.Questions()
	qs[1].Options[0].Key = "changed"
	if fingerprint.Questions()[1].Options[0].Key != "billing" {
		t.Error("a caller changed the canary")
	}
}

// Probes of many keys at once each see their own reference.
func TestTrackerConcurrent(t *testing.T) {
	tr := fingerprint.NewTracker()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			k := fingerprint.Key{Node: "n", Model: string(rune('a' + i))}
			for j := range 50 {
				digest := "x"
				if j >= 25 {
					digest = "y"
				}
				tr.Observe(k, fingerprint.Print{Identity: id("digest", digest)}, 0)
			}
			if gen, _ := tr.Generation(k); gen != 1 {
				t.Errorf("key %v: generation %d, want 1", k, gen)
			}
		})
	}
	wg.Wait()
}

// Every change Compare reports gives another BuildID, the canary's alone
// included; a print that is no change of itself keeps its BuildID.
func TestBuildIDSeparatesEveryChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dist := func(n int) decision.Distribution {
		d := make(decision.Distribution, n)
		var sum float64
		for i := range d {
			d[i] = rng.Float64()
			sum += d[i]
		}
		for i := range d {
			d[i] /= sum
		}
		return d
	}
	nudge := func(d decision.Distribution, by float64) decision.Distribution {
		out := slices.Clone(d)
		out[0] += by
		out[1] -= by
		return out
	}
	changes := 0
	for range 2000 {
		a := fingerprint.Print{Identity: id("model_path", "/m.gguf"), Canary: reading(t, "", dist(2), dist(4), dist(3))}
		by := min(rng.Float64()*0.03, a.Canary.Dists[0][1]) // keeps both values in [0, 1]
		b := a
		b.Canary = reading(t, "", nudge(a.Canary.Dists[0], by), a.Canary.Dists[1], a.Canary.Dists[2])
		c := fingerprint.Compare(a, b, 0)
		if once, again := a.BuildID(0), a.BuildID(0); once != again || len(once) != 16 {
			t.Fatalf("BuildID %q is not stable", a.BuildID(0))
		}
		if c.Changed {
			changes++
			if a.BuildID(0) == b.BuildID(0) {
				t.Fatalf("a canary moved by %v (change %s) kept BuildID %s", by, c, a.BuildID(0))
			}
		}
	}
	if changes < 500 {
		t.Fatalf("only %d of 2000 nudges were changes: the test shows little", changes)
	}
	base := fingerprint.Print{Identity: id("digest", "a")}
	if other := (fingerprint.Print{Identity: id("digest", "b")}); base.BuildID(0) == other.BuildID(0) {
		t.Error("two digests share a BuildID")
	}
	if got := (fingerprint.Print{}).BuildID(0); got != "" {
		t.Errorf("an unknown print has BuildID %q", got)
	}
}
