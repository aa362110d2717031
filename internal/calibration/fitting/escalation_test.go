package fitting

import (
	"math/rand/v2"
	"strings"
	"testing"

	"system1/internal/calibration"
)

func TestCertifyEscalation(t *testing.T) {
	many := func(n int, c float64, w bool) ([]float64, []bool) {
		conf, wrong := make([]float64, n), make([]bool, n)
		for i := range conf {
			conf[i], wrong[i] = c, w
		}
		return conf, wrong
	}
	join := func(a []float64, aw []bool, b []float64, bw []bool) ([]float64, []bool) {
		return append(append([]float64{}, a...), b...), append(append([]bool{}, aw...), bw...)
	}
	c95, w95 := many(200, 0.95, false)
	c60, w60 := many(200, 0.6, true)
	mixC, mixW := join(c95, w95, c60, w60)
	fewC, fewW := many(20, 0.99, false)
	badC, badW := many(300, 0.999, true)
	tests := []struct {
		name      string
		conf      []float64
		wrong     []bool
		certified bool
		threshold float64
	}{
		// 200 right answers at 0.95 pass every grid point down to 0.95;
		// below it the 200 wrong ones at 0.6 do not yet count, so the
		// sequence goes on to 0.61, then fails at 0.60.
		{"right above, wrong below", mixC, mixW, true, 0.61},
		// 20 answers are under the 59 that even none wrong needs at 5%.
		{"too few", fewC, fewW, false, 0},
		// The strictest point fails, and fixed-sequence stops there.
		{"wrong at the top", badC, badW, false, 0},
		{"none", nil, nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := CertifyEscalation(tt.conf, tt.wrong, 0.05, 0.05)
			if err != nil {
				t.Fatal(err)
			}
			if e.Certified != tt.certified || e.Threshold != tt.threshold {
				t.Fatalf("certified %v at %v, want %v at %v (%+v)", e.Certified, e.Threshold, tt.certified, tt.threshold, e)
			}
			if e.Certified && e.UpperBound > 0.05 {
				t.Fatalf("certified with bound %v over the target", e.UpperBound)
			}
			if err := e.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCertifyEscalationRefusesBadInput(t *testing.T) {
	for _, tt := range []struct {
		target, delta float64
		n             int
		want          string
	}{
		{0, 0.05, 1, "target error"},
		{1, 0.05, 1, "target error"},
		{0.05, 0, 1, "delta"},
		{0.05, 0.05, 2, "differ"},
	} {
		_, err := CertifyEscalation([]float64{0.9}, make([]bool, tt.n), tt.target, tt.delta)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("target %v delta %v: error %v, want one naming %q", tt.target, tt.delta, err, tt.want)
		}
	}
}

// TestCertifyEscalationGuarantee checks the finite-sample guarantee by
// simulation: a stage whose confidence c is uniform on [0.6, 1] and wrong
// with probability s(1-c) (s > 1: over-confident) has a true error
// s(1-t)/2 among the answers at or above t. Over many draws of outcomes,
// the share of certified thresholds whose true error exceeds the target
// must stay near delta or under.
func TestCertifyEscalationGuarantee(t *testing.T) {
	const (
		s, target, delta = 2.4, 0.1, 0.1
		n, trials        = 2000, 1000
	)
	rng := rand.New(rand.NewPCG(7, 32))
	over, certified := 0, 0
	for range trials {
		conf, wrong := make([]float64, n), make([]bool, n)
		for i := range conf {
			conf[i] = 0.6 + 0.4*rng.Float64()
			wrong[i] = rng.Float64() < s*(1-conf[i])
		}
		e, err := CertifyEscalation(conf, wrong, target, delta)
		if err != nil {
			t.Fatal(err)
		}
		if !e.Certified {
			continue
		}
		certified++
		if trueErr := s * (1 - e.Threshold) / 2; trueErr > target {
			over++
		}
	}
	if certified < trials/2 {
		t.Fatalf("only %d of %d draws certified a threshold: the test checks nothing", certified, trials)
	}
	t.Logf("%d of %d draws certified; %d of them over the target", certified, trials, over)
	// delta plus three standard errors of a share over the trials.
	if limit := delta + 3*0.0095; float64(over)/trials > limit {
		t.Fatalf("%d of %d certified thresholds have a true error over %v: more than delta %v allows", over, trials, target, delta)
	}
	// A raw threshold of 0.9, as a cascade on raw confidence uses, keeps
	// an error of s*0.05 = 0.12 here: over the target.
	if raw := s * (1 - 0.9) / 2; raw <= target {
		t.Fatalf("the simulated stage is not over-confident at 0.9 (error %v)", raw)
	}
}

// A fit holds one escalation per target error, however many cascades
// share the target (each cascade's target is passed).
func TestSetEscalationsOnePerTarget(t *testing.T) {
	var f calibration.Fit
	SetEscalations(&f, nil, []float64{0.05, 0.1, 0.05, 0.1 + 1e-12})
	var got []float64
	for _, e := range f.Escalations {
		got = append(got, e.TargetError)
	}
	if len(got) != 2 || got[0] != 0.05 || got[1] != 0.1 {
		t.Errorf("escalations at %v, want one at 0.05 and one at 0.1", got)
	}
}
