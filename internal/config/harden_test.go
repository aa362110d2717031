package config

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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
		{"nodes:\n  - name: a\n    price:\n      input_per_mtok: -0.1\n", `nodes[0].price.input_per_mtok: line 4: -0.1 is negative`},
		{"nodes:\n  - name: a\n    price: {per_request: free}\n", `nodes[0].price.per_request: line 3: "free" is not a decimal number of US dollars`},
		{"nodes:\n  - name: a\n    price: {per_request: [1]}\n", `nodes[0].price.per_request: line 3: a price is a number of US dollars`},
		{"nodes:\n  - name: a\n    price: {input_per_mtok: 1, cached_per_mtok: 1}\n", `nodes[0].price.cached_per_mtok: line 3: unknown key`},
		{"nodes:\n  - name: a\n    price:\n      output_per_mtok: 20000\n", `nodes[0].price.output_per_mtok: line 4: 20000 is over 10000 US dollars`},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v; want %q", tc.yaml, err, tc.want)
		}
	}
}

// A price that parses can still be wrong for its node: each is refused
// naming the node and the key, and a good one is read exactly.
func TestNodePrice(t *testing.T) {
	for _, tc := range []struct{ price, dialect, want string }{
		{"{}", "openai", "nodes[0].price (a): give input_per_mtok and output_per_mtok"},
		{"{input_per_mtok: 0.1}", "openai", "nodes[0].price (a): input_per_mtok and output_per_mtok go together"},
		{"{input_per_mtok: 0.0000001, output_per_mtok: 0}", "openai", "nodes[0].price (a): input_per_mtok: 0.0000001 is finer than a pico-dollar a token"},
		{"{per_request: 0.01}", "llamacpp", "nodes[0].price (a): per_request prices a hosted endpoint"},
		{"{input_per_mtok: 0.15, output_per_mtok: 0.6}", "openai", ""},
		{"{per_request: 0.0005, input_per_mtok: 1, output_per_mtok: 2}", "systemone", ""},
	} {
		c, err := Parse([]byte("nodes:\n  - {name: a, url: 'http://x', dialect: " + tc.dialect + ", price: " + tc.price + "}\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.price, err)
		}
		errs := errors.Join(c.Check()...)
		switch {
		case tc.want == "" && errs != nil:
			t.Errorf("%s on %s: %v", tc.price, tc.dialect, errs)
		case tc.want != "" && (errs == nil || !strings.Contains(errs.Error(), tc.want)):
			t.Errorf("%s on %s: errors %v; want %q", tc.price, tc.dialect, errs, tc.want)
		}
	}
	c, err := Parse([]byte("nodes:\n  - {name: a, url: 'http://x', dialect: openai, price: {input_per_mtok: 0.15, output_per_mtok: 0.6}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Nodes[0].Price.Decision()
	if got, _ := p.Cost(1000, 10, 0); got.String() != "0.000156" { // 1000 x 0.15e-6 + 10 x 0.6e-6
		t.Errorf("cost of 1000 in and 10 out = %s, want 0.000156", got)
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
	_, err := Parse([]byte("models: &m big\naliases:\n  small: tiny\n  'q: x': \"y\"\n  ref: *m\n  \"0\": zero\n"))
	if err == nil {
		t.Fatal("an unknown top-level key was accepted")
	}
	c, err := Parse([]byte("listen: &m big\naliases:\n  small: tiny\n  'q: x': \"y\"\n  ref: *m\n  \"0\": zero\n  1: one\n"))
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

// Reading a large file stops when its context ends, before or while it
// reads; a small file is read whole (it takes well under a millisecond).
func TestParseStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ParseContext(ctx, aliasesYAML(200_000)); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled read: %v", err)
	}
	if c, err := ParseContext(ctx, []byte("listen: x\n")); err != nil || c.Listen != "x" {
		t.Errorf("a cancelled read of a small file: %+v %v", c, err)
	}
	// Cancelled while it reads: the read ends with the cancellation.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	data := aliasesYAML(500_000)
	go func() { _, err := ParseContext(ctx, data); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while reading: %v", err)
	}
}

// Hostile and careless files: each is refused with an error (never a
// panic or a hang), or read as YAML means it.
func TestParseHostileFiles(t *testing.T) {
	// Nine levels of ten aliases each: 10^9 strings if expanded.
	var bomb strings.Builder
	bomb.WriteString("keys: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&bomb, "rate_limit%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				bomb.WriteString(", ")
			}
			fmt.Fprintf(&bomb, "*l%d", i-1)
		}
		bomb.WriteString("]\n")
	}
	nested := "nodes:\n  - &n {name: a, models: &m [x, x, x, x, x, x, x, x, x, x]}\n"
	for i := range 9 {
		nested += fmt.Sprintf("  - {name: b%d, models: [*m, *m, *m, *m, *m, *m, *m, *m, *m, *m]}\n", i)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"billion laughs at the top", bomb.String(), "rate_limit1: line 2: unknown key"},
		{"billion laughs in aliases", "keys: &a [x, x]\naliases: {a: *a}\n", `aliases["a"]: line 2: an alias names one model`},
		{"lists of lists", nested, "cannot unmarshal"},
		{"a list at the top", "- a\n- b\n", "cannot unmarshal"},
		{"a scalar at the top", "hello\n", "cannot unmarshal"},
		{"two documents", "listen: a\n---\nlisten: b\n", "line 2: a second YAML document"},
		{"a huge integer", "nodes:\n  - {name: a, max_options: 99999999999999999999}\n", "cannot unmarshal"},
		{"a huge body limit", "max_body_bytes: 1e30\n", "cannot unmarshal"},
		{"a NUL byte", "listen: \"a\x00\"\n", "control characters"},
		{"invalid UTF-8", "listen: \xff\xfe\n", "invalid"},
		{"a binary alias", "aliases: {a: !!binary aGVsbG8=}\n", `aliases["a"]: line 1: a !!binary value`},
		{"a binary key", "keys: [ok, !!binary /w==]\n", "keys[1]: line 1: a !!binary value is not read here"},
		{"a binary listen address", "listen: !!binary aGVsbG8=\n", "listen: line 1: a !!binary value"},
		{"a merge key in aliases", "aliases: {<<: {a: b}}\n", "merge keys"},
		{"a tab indent", "gateway:\n\ttimeout: 1s\n", "cannot start any token"},
		{"a duplicate in a merged node", "nodes:\n  - {name: a, name: b}\n", `nodes[0].name: line 2: the key appears twice`},
		{"a key that is a list", "nodes:\n  - {[a]: b}\n", "nodes[0]: line 2: a key is a name, not a list"},
		{"deep nesting", "keys: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want %q", err, tc.want)
			}
		})
	}
	// What YAML itself means is kept: a merge into a node, an anchor
	// reused, a tag that names the type the field has.
	c, err := Parse([]byte("nodes:\n  - &base {name: a, url: 'http://x', dialect: llamacpp, timeout: 2s}\n  - {<<: *base, name: b}\nkeys: [!!str hello]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 2 || c.Nodes[1].Name != "b" || c.Nodes[1].URL != "http://x" || c.Nodes[1].Timeout != Duration(2*time.Second) || c.Keys[0].Key != "hello" {
		t.Errorf("read %+v", c)
	}
}

// A call reads at least two labels: every question has two options or
// more, and a choice's rounds need two a call, so max_labels 1 would leave
// the node unable to answer anything. It is refused, naming the key.
func TestMaxLabelsBelowTwo(t *testing.T) {
	for _, dialect := range []string{"llamacpp", "openai"} {
		c, err := Parse([]byte("nodes:\n  - {name: a, url: 'http://x', dialect: " + dialect + ", max_labels: 1}\n"))
		if err != nil {
			t.Fatal(err)
		}
		errs := errors.Join(c.Check()...)
		if errs == nil || !strings.Contains(errs.Error(), "nodes[0] (a): max_labels 1") || !strings.Contains(errs.Error(), "at least 2") {
			t.Errorf("%s node with max_labels 1: %v; want it refused naming nodes[0] (a): max_labels 1", dialect, errs)
		}
	}
}

// max_labels is how many labels one call of a llamacpp or openai node
// reads. An ollama node reads Ollama's cap of 20, and a systemone or
// decisions node forwards the questions whole: on those it would be
// ignored, so it is refused naming the key, as num_ctx is off ollama.
func TestMaxLabelsOnlyWhereACallReadsThem(t *testing.T) {
	for _, c := range []struct {
		dialect string
		refused bool
	}{{"llamacpp", false}, {"openai", false}, {"ollama", true}, {"systemone", true}, {"decisions", true}} {
		cfg, err := Parse([]byte("nodes:\n  - {name: a, url: 'http://x', dialect: " + c.dialect + ", max_labels: 5}\n"))
		if err != nil {
			t.Fatal(err)
		}
		errs := errors.Join(cfg.Check()...)
		if refused := errs != nil && strings.Contains(errs.Error(), "nodes[0].max_labels (a)"); refused != c.refused {
			t.Errorf("%s node with max_labels 5: %v; refused naming nodes[0].max_labels (a): %v, want %v", c.dialect, errs, refused, c.refused)
		}
	}
}
