package config

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Errors found while reading name the key path, and the line.
func TestParseErrorsNameTheKeyPath(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"nodes:\n  - name: a\n    url: http://x\n    timeout: -1s\n", "nodes[0].timeout: line 4: duration -1s is negative"},
		{"nodes:\n  - {name: a}\n  - {name: b, queue_timeout: soon}\n", `nodes[1].queue_timeout: line 3: "soon" is not a duration`},
		{"gateway:\n  timeout: -5s\n", "gateway.timeout: line 2"},
		{"timeouts: {drain: -30s}\n", "timeouts.drain: line 1"},
		{"providers:\n  - {name: p, timeout: 1y}\n", "providers[0].timeout: line 2"},
		{"probe_every: -1s\n", "probe_every: line 1"},
		{"nodes:\n  - name: a\n    bogus: 1\n", `nodes[0].bogus: line 3: unknown key`},
		{"gateway:\n  fits: f\n  Fits: g\n", `gateway.Fits: line 3: unknown key`},
		{"listen: a\nlisten: b\n", `listen: line 2: the key appears twice (first at line 1)`},
		{"aliases:\n  a: b\n  a: c\n", `aliases["a"]: line 3: the key appears twice`},
		{"aliases:\n  a: [b]\n", `aliases["a"]: line 2: an alias names one model`},
		{"aliases:\n  ? [a]\n  : b\n", `aliases: line 2: an alias is a model id`},
		{"aliases: [a, b]\n", `aliases: line 1: a mapping`},
		{"nodes:\n  - name: a\n    tls: {x: 1}\n", `nodes[0].tls: line 3: unknown key`},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v; want %q", tc.yaml, err, tc.want)
		}
	}
}

// A choice needs two options: max_options 1 is refused, naming the key.
func TestMaxOptionsBelowTwo(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"nodes:\n  - {name: a, url: 'http://x', dialect: llamacpp, max_options: 1}\n", "nodes[0] (a): max_options 1"},
		{"providers:\n  - {name: p, kind: engine, model: m, max_options: 1}\n", "providers[0] (p): max_options 1"},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		errs := errors.Join(c.Check()...)
		if errs == nil || !strings.Contains(errs.Error(), tc.want) || !strings.Contains(errs.Error(), "at least 2") {
			t.Errorf("%q: %v; want %q", tc.yaml, errs, tc.want)
		}
	}
}

// Aliases read as before: plain, quoted, anchored and merged values.
func TestAliasesRead(t *testing.T) {
	c, err := Parse([]byte("models: &m big\naliases:\n  small: tiny\n  'q: x': \"y\"\n  ref: *m\n  \"0\": zero\n"))
	if err == nil {
		t.Fatal("an unknown top-level key was accepted")
	}
	c, err = Parse([]byte("listen: &m big\naliases:\n  small: tiny\n  'q: x': \"y\"\n  ref: *m\n  \"0\": zero\n  1: one\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"small": "tiny", "q: x": "y", "ref": "big", "0": "zero", "1": "one"}
	if len(c.Aliases) != len(want) {
		t.Fatalf("aliases %v", c.Aliases)
	}
	for k, v := range want {
		if c.Aliases[k] != v {
			t.Errorf("aliases[%q] = %q; want %q", k, c.Aliases[k], v)
		}
	}
	if c, err := Parse([]byte("aliases:\n")); err != nil || len(c.Aliases) != 0 {
		t.Errorf("empty aliases: %v %v", c.Aliases, err)
	}
}

// Reading stops when its context ends, large file or not.
func TestParseStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ParseContext(ctx, aliasesYAML(200_000)); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled read: %v", err)
	}
	if _, err := ParseContext(ctx, []byte("listen: x\n")); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled read of a small file: %v", err)
	}
}
