package config

import (
	"strings"
	"testing"
)

// Every cascade is checked on its own and against the other names the
// configuration serves, and a bad one is an error naming its key.
func TestCascadeChecks(t *testing.T) {
	const node = "nodes:\n  - {name: n1, url: 'http://127.0.0.1:1', dialect: llamacpp, models: [small, large]}\n"
	cases := []struct {
		yaml, want string
	}{
		{"cascades:\n  - {model: c, stages: [small, large], target_error: 0.05}\n", ""},
		{"cascades:\n  - {model: c, stages: [small, large], target_error: 0.05, uncertified: keep}\n", ""},
		{"cascades:\n  - {stages: [small, large], target_error: 0.05}\n", "cascades[0]: model is required"},
		{"cascades:\n  - {model: c, stages: [small], target_error: 0.05}\n", "cascades[0] (c): stages: a cascade needs at least two"},
		{"cascades:\n  - {model: c, stages: [small, small], target_error: 0.05}\n", "stages[1]: small is asked already"},
		{"cascades:\n  - {model: c, stages: [small, ''], target_error: 0.05}\n", "stages[1] is empty"},
		{"cascades:\n  - {model: c, stages: [small, large], target_error: 0}\n", "target_error: 0 is not in (0, 1)"},
		{"cascades:\n  - {model: c, stages: [small, large], target_error: .nan}\n", "target_error: NaN is not in (0, 1)"},
		{"cascades:\n  - {model: c, stages: [small, large], target_error: 0.05, uncertified: maybe}\n", `uncertified: "maybe" is not escalate or keep`},
		{"cascades:\n  - {model: c, stages: [small, large], target_error: 0.05}\n  - {model: c, stages: [small, large], target_error: 0.1}\n", "cascades[1] (c): model names another cascade already"},
		{"cascades:\n  - {model: c, stages: [small, large], target_error: 0.05}\n  - {model: d, stages: [c, large], target_error: 0.1}\n", "cascades[1] (d): stages[0]: c is a cascade"},
		{"aliases: {fast: small}\ncascades:\n  - {model: c, stages: [fast, small], target_error: 0.05}\n", "stages[1]: small is asked already (as fast)"},
		{"aliases: {fast: small}\ncascades:\n  - {model: c, stages: [small, fast], target_error: 0.05}\n", "stages[1]: fast is asked already (as small)"},
		{"aliases: {fast: small, quick: small}\ncascades:\n  - {model: c, stages: [fast, quick], target_error: 0.05}\n", "stages[1]: quick is asked already (as fast)"},
		{"aliases: {fast: small}\ncascades:\n  - {model: c, stages: [fast, large], target_error: 0.05}\n", ""},
		{"aliases: {x: c}\ncascades:\n  - {model: c, stages: [small, large], target_error: 0.05}\n  - {model: d, stages: [x, large], target_error: 0.1}\n", "cascades[1] (d): stages[0]: x is a cascade (an alias of c)"},
		{"aliases: {c: small}\ncascades:\n  - {model: c, stages: [small, large], target_error: 0.05}\n", "model is an alias's name already"},
		{node + "cascades:\n  - {model: small, stages: [large, other], target_error: 0.05}\n", "model is served by node n1 already"},
	}
	for _, tc := range cases {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		var got []string
		for _, e := range c.checkCascades() {
			got = append(got, e.Error())
		}
		all := strings.Join(got, "; ")
		if (tc.want == "") != (len(got) == 0) || !strings.Contains(all, tc.want) {
			t.Errorf("%q: %q; want %q", tc.yaml, all, tc.want)
		}
	}
}

// An unknown key of a cascade is refused with its line, as every key is.
func TestCascadeUnknownKey(t *testing.T) {
	_, err := Parse([]byte("cascades:\n  - model: c\n    stages: [a, b]\n    target: 0.05\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "target") {
		t.Fatalf("error %v, want one naming line 4 and the key", err)
	}
}
