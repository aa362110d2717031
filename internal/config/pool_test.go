package config

import (
	"strings"
	"testing"
)

// pool is read on every engine dialect; a systemone node and the slot
// settings it turns off are refused, naming the key.
func TestPoolChecks(t *testing.T) {
	for _, c := range []struct {
		node, want string
	}{
		{"{name: a, url: 'http://gw', dialect: openai, pool: true}", ""},
		{"{name: a, url: 'http://gw', dialect: llamacpp, pool: true}", ""},
		{"{name: a, url: 'http://gw', dialect: ollama, pool: true}", ""},
		{"{name: a, url: 'http://gw', dialect: llamacpp, pool: true, pin_slots: false, spread_slots: false}", ""},
		{"{name: a, url: 'http://gw', dialect: systemone, pool: true}", "nodes[0].pool (a): a systemone node forwards each request whole"},
		{"{name: a, url: 'http://gw', dialect: llamacpp, pool: true, pin_slots: true}", "nodes[0].pin_slots (a): a pool's engines each have their own slots"},
		{"{name: a, url: 'http://gw', dialect: llamacpp, pool: true, spread_slots: true}", "nodes[0].spread_slots (a)"},
	} {
		cfg, err := Parse([]byte("nodes: [" + c.node + "]"))
		if err != nil {
			t.Fatalf("%s: %v", c.node, err)
		}
		errs := cfg.Check()
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.node, errs)
		case c.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want)):
			t.Errorf("%s: %v, want one error with %q", c.node, errs, c.want)
		}
	}
	if cfg, _ := Parse([]byte("nodes: [{name: a, url: 'http://gw', dialect: openai, pool: true}]")); !cfg.Nodes[0].Pool {
		t.Error("pool: true did not read as true")
	}
}
