package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sections are the configuration's top-level keys, read from Config's
// yaml tags: what a problem Check reports must name first.
var sections = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}()

// FuzzParse feeds Parse any bytes. It must never panic, nor may Check on
// what Parse accepts; no duration Parse accepts is negative; every
// problem Check reports names its section; and what Check accepts keeps
// the documented ranges.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(""))
	f.Add([]byte("calibration: apply\ngateway:\n  fits: fits.json\nnodes:\n  - name: tiny\n    url: http://127.0.0.1:55213\n    dialect: llamacpp\n    models: [stories260k]\n"))
	f.Add([]byte("nodes:\n  - &n {name: a, url: 'http://h', dialect: ollama}\n  - *n\n"))
	f.Add([]byte("gateway: {threshold: .nan, timeout: -1s}\nrounding: 13\n"))
	f.Add([]byte("listen: &a x\naliases: {a: *a, b: c, <<: {d: e}}\nnodes: [{<<: {name: n}, name: m}]\n"))
	f.Add([]byte("aliases: !!binary aGVsbG8=\nkeys: [!!binary aGVsbG8=]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil || err.Error() == "" {
				t.Fatalf("error %q with configuration %+v", err, c)
			}
			return
		}
		for _, d := range []Duration{c.ProbeEvery, c.Timeouts.ReadHeader, c.Timeouts.Read, c.Timeouts.Write, c.Timeouts.Idle,
			c.Timeouts.Request, c.Timeouts.Drain, c.Gateway.Timeout, c.Gateway.Deadline} {
			if d < 0 {
				t.Fatalf("accepted a negative duration %v", d)
			}
		}
		for _, n := range c.Nodes {
			if n.Timeout < 0 || n.QueueTimeout < 0 {
				t.Fatalf("node %q: negative duration accepted", n.Name)
			}
		}
		for _, p := range c.Providers {
			if p.Timeout < 0 {
				t.Fatalf("provider %q: negative duration accepted", p.Name)
			}
		}

		errs := c.Check()
		for _, e := range errs {
			msg := e.Error()
			if i := strings.IndexAny(msg, ":.[ "); i < 0 || !sections[msg[:i]] {
				t.Fatalf("problem %q names no section", msg)
			}
		}
		if len(errs) == 0 {
			if th := c.Gateway.Threshold; th != nil && !(*th >= 0 && *th <= 1) {
				t.Fatalf("accepted threshold %v", *th)
			}
			if r := c.Rounding; r != nil && (*r < -1 || *r > 12) {
				t.Fatalf("accepted rounding %d", *r)
			}
			seen := map[string]bool{}
			for _, n := range c.Nodes {
				if n.Name == "" || seen[n.Name] || !slices.Contains(Dialects, n.Dialect) || n.MaxOptions < 0 || n.MaxOptions == 1 || n.MaxOptions > MaxOptions ||
					n.MaxLabels < 0 || n.MaxInFlight < 0 || n.Queue < 0 {
					t.Fatalf("accepted node %+v", n)
				}
				seen[n.Name] = true
			}
			for _, p := range c.Providers {
				if p.Name == "" || !slices.Contains(ProviderKinds, p.Kind) || p.Model == "" || p.MaxOptions < 0 || p.MaxOptions == 1 {
					t.Fatalf("accepted provider %+v", p)
				}
			}
		}
	})
}
