package config

import (
	"strings"
	"testing"
)

// Every shadow rule and drift setting is checked, and a bad one is an
// error naming its key.
func TestShadowAndDriftChecks(t *testing.T) {
	cases := []struct {
		yaml, want string
	}{
		{"shadow:\n  - {model: a, candidate: b, share: 0.1}\ndrift: {window: 1h, reference: 24h, threshold: 0.2}\n", ""},
		{"shadow:\n  - {candidate: b, share: 0.1}\n", "shadow[0]: model is required"},
		{"shadow:\n  - {model: a, share: 0.1}\n", "shadow[0] (a): candidate is required"},
		{"shadow:\n  - {model: a, candidate: a, share: 0.1}\n", "candidate is the model itself"},
		{"shadow:\n  - {model: a, candidate: b, share: 0}\n", "share 0 is not in (0, 1]"},
		{"shadow:\n  - {model: a, candidate: b, share: 1.5}\n", "share 1.5 is not in (0, 1]"},
		{"shadow:\n  - {model: a, candidate: b, share: .nan}\n", "share NaN is not in (0, 1]"},
		{"shadow:\n  - {model: a, candidate: b, share: 1}\n  - {model: a, candidate: c, share: 1}\n", "shadow[1] (a): the model has a shadow already"},
		{"drift: {threshold: -1}\n", "drift.threshold"},
		{"drift: {threshold: .inf}\n", "drift.threshold"},
	}
	for _, tc := range cases {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		var got []string
		for _, e := range append(checkShadow(c.Shadow, c.Cascades), c.Drift.check()...) {
			got = append(got, e.Error())
		}
		all := strings.Join(got, "; ")
		if (tc.want == "") != (len(got) == 0) || !strings.Contains(all, tc.want) {
			t.Errorf("%q: %q; want %q", tc.yaml, all, tc.want)
		}
	}
}

// A cascade is answered stage by stage, each stage's request shadowed as
// its own model's: a shadow rule whose model is a cascade never drew a
// request, and one whose candidate is a cascade failed every shadowed
// request (no node serves it). Both are refused at load, naming the rule
// and pointing to the stages.
func TestShadowOfACascadeIsRefused(t *testing.T) {
	const base = "nodes:\n  - {name: n, url: http://127.0.0.1:8080, dialect: llamacpp, models: [small, large, cand]}\n" +
		"cascades:\n  - {model: casc, stages: [small, large], target_error: 0.05}\n"
	for _, tc := range []struct{ shadow, want string }{
		{"shadow:\n  - {model: small, candidate: cand, share: 1}\n", ""},
		{"shadow:\n  - {model: casc, candidate: cand, share: 1}\n", "shadow[0] (casc): model casc is a cascade"},
		{"shadow:\n  - {model: cand, candidate: casc, share: 1}\n", "shadow[0] (cand): candidate casc is a cascade"},
	} {
		c, err := Parse([]byte(base + tc.shadow))
		if err != nil {
			t.Fatalf("%q: %v", tc.shadow, err)
		}
		var got []string
		for _, e := range c.Check() {
			got = append(got, e.Error())
		}
		all := strings.Join(got, "; ")
		if (tc.want == "") != (len(got) == 0) || !strings.Contains(all, tc.want) {
			t.Errorf("%q: %q; want %q", tc.shadow, all, tc.want)
		}
	}
}
