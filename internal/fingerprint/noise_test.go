package fingerprint_test

import (
	"math"
	"testing"

	"system1/internal/decision"
	"system1/internal/fingerprint"
)

// The noise test's limit is the Bonferroni bound of a normal difference:
// about 5.5 standard deviations over the canary's values at 1e-6, higher
// for more values or a rarer false alarm.
func TestZLimit(t *testing.T) {
	z := fingerprint.ZLimit(35, fingerprint.FalseAlarm)
	// P(|N(0,1)| > z) = erfc(z/sqrt2) must be alpha/m.
	if got := math.Erfc(z/math.Sqrt2) * 35; math.Abs(got-fingerprint.FalseAlarm)/fingerprint.FalseAlarm > 1e-6 || z < 5 || z > 6 {
		t.Errorf("ZLimit(35, 1e-6) = %v: the chance over 35 values is %v", z, got)
	}
	if fingerprint.ZLimit(70, 1e-6) <= z || fingerprint.ZLimit(35, 1e-9) <= z || !math.IsInf(fingerprint.ZLimit(0, 1e-6), 1) {
		t.Error("ZLimit does not grow with the values compared and a rarer false alarm")
	}
}

// Once the node's noise is measured, a move under the tolerance is a
// change when it is far beyond the noise and none when the noise
// explains it; a question answered in one reading alone is a change; a
// move beyond the tolerance is a change whatever the noise; readings
// rounded to a step are held to the tolerance alone.
func TestCompareNoise(t *testing.T) {
	u := decision.Distribution{0.6123, 0.3877}
	at := func(p float64) decision.Distribution { return decision.Distribution{p, 1 - p} }
	base := reading(t, "m", u, choice, score)
	// Two reads whose first value differs by a factor e^0.001: sigma
	// about 0.001 / sqrt(35) per value, floored at NoiseFloor.
	var quiet, loud fingerprint.Noise
	quiet.Add(base, reading(t, "m", at(0.6123*math.Exp(0.0002)), choice, score))
	for range 3 {
		loud.Add(base, reading(t, "m", at(0.6123*math.Exp(0.004)), choice, score))
	}
	if !quiet.Measured() || quiet.Sigma() != fingerprint.NoiseFloor || loud.Sigma() <= fingerprint.NoiseFloor {
		t.Fatalf("noise: quiet %+v sigma %v, loud %+v sigma %v", quiet, quiet.Sigma(), loud, loud.Sigma())
	}
	small := reading(t, "m", at(0.6123*math.Exp(0.003)), choice, score) // 0.0018 in probability
	for _, tc := range []struct {
		name    string
		next    fingerprint.Reading
		noise   fingerprint.Noise
		changed bool
	}{
		{"a small move, noise not measured", small, fingerprint.Noise{}, false},
		{"a small move far beyond a quiet node's noise", small, quiet, true},
		{"a small move within a loud node's noise", small, loud, false},
		{"a question answered in one alone", reading(t, "m", u, nil, score), quiet, true},
		{"beyond the tolerance, however loud", reading(t, "m", at(0.65), choice, score), loud, true},
		{"rounded readings", reading(t, "m", decision.Distribution{0.61, 0.39}, choice, score), quiet, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := base
			if tc.name == "rounded readings" {
				ref = reading(t, "m", decision.Distribution{0.6, 0.4}, choice, score)
			}
			c := fingerprint.CompareNoise(fingerprint.Print{Canary: ref}, fingerprint.Print{Canary: tc.next}, 0.01, tc.noise)
			if c.Changed != tc.changed || c.Changed == (c.String() == "unchanged") {
				t.Fatalf("%+v: %s", c, c)
			}
		})
	}
}

// A tracker that learnt another's builds names a reading consistent with
// one of them by its id, though the reading falls in another cell of the
// tolerance's grid; a reading beyond the tolerance, or of another
// identity, is another build.
func TestTrackerLearn(t *testing.T) {
	at := func(p float64) fingerprint.Print {
		return fingerprint.Print{Identity: id("digest", "a"), Canary: reading(t, "m", decision.Distribution{p, 1 - p}, choice, score)}
	}
	k := fingerprint.Key{Node: "n", Model: "m"}
	first := fingerprint.NewTracker()
	first.Observe(k, at(0.6099), 0)
	bs, grown := first.Builds()
	if len(bs) != 1 || !grown || bs[0].ID != first.ID(k) {
		t.Fatalf("builds %+v, grown %v, id %s", bs, grown, first.ID(k))
	}
	if _, again := first.Builds(); again {
		t.Error("Builds says grown twice for one build")
	}
	// A build whose canary is not this canary's reading is not learnt: it
	// would compare with nothing, and so match anything.
	stale := fingerprint.NewTracker()
	old := bs[0]
	old.Print.Canary.Dists = old.Print.Canary.Dists[:3]
	stale.Learn([]fingerprint.Build{old})
	stale.Observe(k, at(0.7), 0)
	if stale.ID(k) == first.ID(k) {
		t.Errorf("a reading beyond the tolerance took the id %s of a build whose canary has 3 questions", first.ID(k))
	}
	for _, tc := range []struct {
		name string
		p    fingerprint.Print
		same bool
	}{
		{"across the grid's edge", at(0.6101), true},
		{"beyond the tolerance", at(0.63), false},
		{"another identity", fingerprint.Print{Identity: id("digest", "b"), Canary: at(0.6099).Canary}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second := fingerprint.NewTracker()
			second.Learn(bs)
			second.Observe(k, tc.p, 0)
			if (second.ID(k) == first.ID(k)) != tc.same {
				t.Errorf("named %s, the known build %s: the same %v, want %v", second.ID(k), first.ID(k), !tc.same, tc.same)
			}
			if alone := fingerprint.NewTracker(); tc.same {
				alone.Observe(k, tc.p, 0)
				if alone.ID(k) == first.ID(k) {
					t.Errorf("without the known build the reading was named %s too: the test shows nothing", alone.ID(k))
				}
			}
		})
	}
}
