package config

import (
	"strings"
	"testing"
)

// num_ctx is taken on ollama nodes only (others fix their context when
// they start) and neither it nor max_engine_calls may be negative.
func TestCheckEngineLimits(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"num_ctx on ollama", "nodes:\n  - {name: a, url: http://h, dialect: ollama, num_ctx: 8192}\n", nil},
		{"max_engine_calls", "nodes:\n  - {name: a, url: http://h, dialect: openai, max_engine_calls: 1024}\n", nil},
		{"num_ctx on llamacpp", "nodes:\n  - {name: a, url: http://h, dialect: llamacpp, num_ctx: 256}\n",
			[]string{"nodes[0].num_ctx (a): only an ollama node takes its context size per request (this one is llamacpp); other engines fix it when they start (llama-server -c"}},
		{"num_ctx on openai", "nodes:\n  - {name: a, url: http://h, dialect: openai, num_ctx: 256}\n", []string{"(this one is openai)"}},
		{"negative num_ctx", "nodes:\n  - {name: a, url: http://h, dialect: ollama, num_ctx: -1}\n", []string{"nodes[0].num_ctx (a): -1 is negative"}},
		{"negative max_engine_calls", "nodes:\n  - {name: a, url: http://h, dialect: ollama, max_engine_calls: -5}\n", []string{"nodes[0].max_engine_calls (a): -5 is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			errs := c.Check()
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d like %q", errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %q does not say %q", errs[i], w)
				}
			}
		})
	}
}
