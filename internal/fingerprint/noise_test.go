package fingerprint_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/fingerprint"
)

// The noise test's limit is the chi-square quantile of the RMS of normal
// differences: the share of RMS values of m standard normals beyond
// ZLimit(m, alpha) is alpha (checked where a sample can see it, 1%), and
// the limit is higher for a rarer false alarm and lower for more values.
func TestZLimit(t *testing.T) {
	const m, alpha, draws = 35, 0.01, 20_000
	rng := rand.New(rand.NewPCG(1, 2))
	lim := fingerprint.ZLimit(m, alpha)
	beyond := 0
	for range draws {
		var s float64
		for range m {
			x := rng.NormFloat64()
			s += x * x
		}
		if math.Sqrt(s/m) > lim {
			beyond++
		}
	}
	// 1% of 20,000 draws: 200, with a standard deviation of about 14.
	if beyond < 150 || beyond > 250 {
		t.Errorf("%d of %d RMS values of %d normals beyond ZLimit(%d, %v) = %.4f, want about %d", beyond, draws, m, m, alpha, lim, int(alpha*draws))
	}
	z := fingerprint.ZLimit(m, fingerprint.FalseAlarm)
	if z < 1.5 || z > 1.7 || fingerprint.ZLimit(70, fingerprint.FalseAlarm) >= z || fingerprint.ZLimit(m, 1e-9) <= z || !math.IsInf(fingerprint.ZLimit(0, 1e-6), 1) {
		t.Errorf("ZLimit(35, 1e-6) = %v, or it does not grow with a rarer false alarm and shrink with more values", z)
	}
}

// moved is r with every value's log-probability moved by eps, up and
// down in turn, each distribution renormalised: an RMS move of about
// eps.
func moved(t *testing.T, r fingerprint.Reading, eps float64) fingerprint.Reading {
	t.Helper()
	dists := make([]decision.Distribution, len(r.Dists))
	for i, d := range r.Dists {
		if d == nil {
			continue
		}
		nd, sum := make(decision.Distribution, len(d)), 0.0
		for j, p := range d {
			nd[j] = p * math.Exp(eps*float64(1-2*((i+j)%2)))
			sum += nd[j]
		}
		for j := range nd {
			nd[j] /= sum
		}
		dists[i] = nd
	}
	out, err := fingerprint.NewReading(dists, r.Model)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Once the node's noise is measured, a move under the tolerance is a
// change when it is far beyond the noise and none when the noise
// explains it; a question answered in one reading alone is a change; a
// move beyond the tolerance is a change whatever the noise; readings
// rounded to a step are held to the tolerance alone.
func TestCompareNoise(t *testing.T) {
	u := decision.Distribution{0.6123, 0.3877}
	base := reading(t, "m", u, choice, score)
	var quiet, loud fingerprint.Noise
	for range fingerprint.NoiseReads {
		quiet.Add(base, moved(t, base, 1e-4))
		loud.Add(base, moved(t, base, 0.003))
	}
	if !quiet.Measured() || quiet.Sigma() != fingerprint.NoiseFloor || loud.Sigma() < 0.0025 {
		t.Fatalf("noise: quiet %+v sigma %v, loud %+v sigma %v", quiet, quiet.Sigma(), loud, loud.Sigma())
	}
	small := moved(t, base, 0.002) // about 0.001 in probability
	for _, tc := range []struct {
		name    string
		ref     fingerprint.Reading
		next    fingerprint.Reading
		noise   fingerprint.Noise
		changed bool
	}{
		{"a small move, noise not measured", base, small, fingerprint.Noise{}, false},
		{"a small move far beyond a quiet node's noise", base, small, quiet, true},
		{"a small move within a loud node's noise", base, small, loud, false},
		{"a question answered in one alone", base, reading(t, "m", u, nil, score), quiet, true},
		{"beyond the tolerance, however loud", base, reading(t, "m", decision.Distribution{0.65, 0.35}, choice, score), loud, true},
		{"rounded readings", reading(t, "m", decision.Distribution{0.6, 0.4}, choice, score), reading(t, "m", decision.Distribution{0.61, 0.39}, choice, score), quiet, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fingerprint.CompareNoise(fingerprint.Print{Canary: tc.ref}, fingerprint.Print{Canary: tc.next}, 0.01, tc.noise)
			if c.Changed != tc.changed || c.Changed == (c.String() == "unchanged") {
				t.Fatalf("%+v: %s", c, c)
			}
		})
	}
}

// atZ is base moved so that the noise test, against the noise floor,
// finds it z times the noise.
func atZ(t *testing.T, base fingerprint.Reading, z float64) fingerprint.Reading {
	t.Helper()
	floor := fingerprint.Noise{N: fingerprint.NoiseReads}
	const eps = 1e-3
	c := fingerprint.CompareNoise(fingerprint.Print{Canary: base}, fingerprint.Print{Canary: moved(t, base, eps)}, 0.01, floor)
	r := moved(t, base, eps*z/c.Z)
	if c := fingerprint.CompareNoise(fingerprint.Print{Canary: base}, fingerprint.Print{Canary: r}, 0.01, floor); math.Abs(c.Z-z) > 0.02*z {
		t.Fatalf("moved to z %.3f, want %.3f", c.Z, z)
	}
	return r
}

// A Tracker with the noise test takes a move beyond the node's noise for
// a change only when Confirm reads in a row make it and their pooled test
// confirms it: batch noise that moves fewer reads in a row, or Confirm
// reads within the pooled limit, is learnt as the node's noise, and is
// then no suspect; a move too small for one read's test is a change in
// Confirm; a failed read says nothing and breaks no run; a move beyond
// the tolerance needs no confirmation.
func TestTrackerConfirms(t *testing.T) {
	base := reading(t, "m", decision.Distribution{0.6123, 0.3877}, choice, score)
	batch, requant := moved(t, base, 0.0015), moved(t, base, 0.004)
	// The limits of one read's test and of Confirm reads pooled, for the
	// values the reading compares.
	one := fingerprint.CompareNoise(fingerprint.Print{Canary: base}, fingerprint.Print{Canary: requant}, 0.01, fingerprint.Noise{N: fingerprint.NoiseReads}).ZLimit
	values := 1
	for fingerprint.ZLimit(values, fingerprint.FalseAlarm) != one {
		if values++; values > 1000 {
			t.Fatalf("no count of values up to 1,000 has one read's limit %v", one)
		}
	}
	pooled := fingerprint.ZLimit(fingerprint.Confirm*values, fingerprint.FalseAlarm)
	small, within := atZ(t, base, (one+pooled)/2), atZ(t, base, (1+pooled)/2)
	if pooled >= one-0.2 || (1+pooled)/2 < 1.05 {
		t.Fatalf("limits %.3f for one read and %.3f pooled over %d values leave no room between them", one, pooled, values)
	}
	var failed fingerprint.Reading
	far := reading(t, "m", decision.Distribution{0.65, 0.35}, choice, score)
	for _, tc := range []struct {
		name  string
		reads []fingerprint.Reading // after the reference and NoiseReads repeats
		at    int                   // the read that is a change, -1 none
	}{
		{"batch noise in runs shorter than Confirm", []fingerprint.Reading{batch, batch, base, batch, batch, batch, batch, batch}, -1},
		{"a change confirmed", []fingerprint.Reading{requant, requant, requant}, 2},
		{"a failed read in a run", []fingerprint.Reading{requant, failed, requant, requant}, 3},
		{"a run broken, then a change", []fingerprint.Reading{requant, base, moved(t, base, 0.02), moved(t, base, 0.02), moved(t, base, 0.02)}, 4},
		{"beyond the tolerance", []fingerprint.Reading{far}, 0},
		{"a move each read's test misses, confirmed pooled", []fingerprint.Reading{small, small, small}, 2},
		{"beyond the noise, pooled within the limit: learnt", []fingerprint.Reading{within, within, within, within, within, within, small, small, small}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, k := fingerprint.NewTracker(), fingerprint.Key{Node: "n", Model: "m"}
			tr.NoiseTest = true
			for range fingerprint.NoiseReads + 1 {
				if c := tr.Observe(k, fingerprint.Print{Canary: base}, 0); c.Changed {
					t.Fatalf("a repeat of the reference: %s", c)
				}
			}
			at := -1
			for i, r := range tc.reads {
				c := tr.Observe(k, fingerprint.Print{Canary: r}, 0)
				if c.Suspect > fingerprint.Confirm || c.Changed && c.Suspect != 0 && c.Suspect != fingerprint.Confirm {
					t.Fatalf("read %d: %d suspect reads in a row, changed %v", i, c.Suspect, c.Changed)
				}
				if c.Changed {
					if c.Suspect == fingerprint.Confirm && !strings.Contains(c.String(), "reads in a row") {
						t.Errorf("read %d: %q does not say the reads that confirmed it", i, c)
					}
					if at < 0 {
						at = i
					}
				}
			}
			if at != tc.at {
				t.Errorf("the change came at read %d, want %d (noise %+v)", at, tc.at, tr.Noise(k))
			}
		})
	}
}

// Until NoiseReads reads are measured the noise test holds no read: the
// largest of fewer reads is too often below the node's noise. Reads
// that move further than the first repeat, and would be confirmed
// against it, are measured as the node's noise instead, and so are no
// suspect once the test holds reads; a move beyond them, under the
// tolerance, still is.
func TestTrackerMeasuresBeforeTesting(t *testing.T) {
	base := reading(t, "m", decision.Distribution{0.6123, 0.3877}, choice, score)
	tr, k := fingerprint.NewTracker(), fingerprint.Key{Node: "n", Model: "m"}
	tr.NoiseTest = true
	reads := []fingerprint.Reading{base, moved(t, base, 0.001)}
	for range 2 * fingerprint.NoiseReads {
		reads = append(reads, moved(t, base, 0.004))
	}
	for i, r := range reads {
		c := tr.Observe(k, fingerprint.Print{Canary: r}, 0)
		if c.Changed || c.Suspect != 0 {
			t.Fatalf("read %d of an unchanged build (noise %+v): %+v", i, tr.Noise(k), c)
		}
		if tested := i > fingerprint.NoiseReads; c.Tested != tested {
			t.Fatalf("read %d tested %v, want %v (noise %+v)", i, c.Tested, tested, tr.Noise(k))
		}
	}
	var c fingerprint.Change
	for range fingerprint.Confirm {
		c = tr.Observe(k, fingerprint.Print{Canary: moved(t, base, 0.012)}, 0)
	}
	if !c.Changed || c.Suspect != fingerprint.Confirm {
		t.Errorf("three times the noise measured (%+v), under the tolerance: %+v", tr.Noise(k), c)
	}
}
