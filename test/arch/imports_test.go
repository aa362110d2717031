// Package arch_test holds the layering of docs/architecture.md to the
// code: a test fails as soon as a package imports what its layer may not.
package arch_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
}

// packages lists every package of the module, with its imports.
func packages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "system1/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var all []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
	if len(all) < 10 {
		t.Fatalf("go list found only %d packages", len(all))
	}
	return all
}

const (
	engineCore = "system1/internal/engine"
	wire       = "system1/internal/systemone"
)

// dialects are the engine dialect packages: every package under
// internal/engine but the core itself.
func dialect(path string) bool { return strings.HasPrefix(path, engineCore+"/") }

// enginePkg is the engine core or a dialect.
func enginePkg(path string) bool { return path == engineCore || dialect(path) }

// rule is one layering rule: the packages it covers may not import what
// forbidden reports, and why says so in the failure.
type rule struct {
	covers    func(path string) bool
	forbidden func(imp string) bool
	why       string
}

var rules = []rule{
	{
		covers:    func(p string) bool { return p == "system1/internal/gateway" },
		forbidden: func(imp string) bool { return enginePkg(imp) || imp == wire || imp == "net/http" },
		why:       "the gateway is a contract and a policy over the fleet: it talks to no engine, no wire and no HTTP",
	},
	{
		covers:    func(p string) bool { return p == "system1/internal/httpapi" },
		forbidden: enginePkg,
		why:       "the HTTP face parses, calls the core and writes: engines are the fleet's",
	},
	{
		covers: func(p string) bool {
			return p != "system1/internal/fleet" && !dialect(p) && !strings.HasPrefix(p, "system1/bench/")
		},
		forbidden: dialect,
		why:       "only the fleet (and tests and benchmarks) build engine dialects",
	},
}

// violations lists every import of the packages that breaks a rule. Only
// the packages' own files count: tests may import what they need to drive
// a face as its users do.
func violations(all []pkg) []string {
	var out []string
	for _, p := range all {
		for _, r := range rules {
			if !r.covers(p.ImportPath) {
				continue
			}
			for _, imp := range p.Imports {
				if r.forbidden(imp) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p.ImportPath, imp, r.why))
				}
			}
		}
	}
	return out
}

// TestLayers fails when a package imports what its layer may not.
func TestLayers(t *testing.T) {
	for _, v := range violations(packages(t)) {
		t.Error(v)
	}
}

// The rules catch what they are meant to: each forbidden import, put into
// a package it is forbidden in, is reported.
func TestLayersCatchForbiddenImports(t *testing.T) {
	for _, c := range []struct{ pkg, imp string }{
		{"system1/internal/gateway", "system1/internal/engine"},
		{"system1/internal/gateway", "system1/internal/engine/llamacpp"},
		{"system1/internal/gateway", "system1/internal/systemone"},
		{"system1/internal/gateway", "net/http"},
		{"system1/internal/httpapi", "system1/internal/engine/openai"},
		{"system1/internal/httpapi", "system1/internal/engine"},
		{"system1/cmd/system1", "system1/internal/engine/ollama"},
		{"system1/internal/mcpserver", "system1/internal/engine/llamacpp"},
	} {
		if v := violations([]pkg{{ImportPath: c.pkg, Imports: []string{c.imp}}}); len(v) == 0 {
			t.Errorf("%s importing %s is not reported", c.pkg, c.imp)
		}
	}
	for _, c := range []struct{ pkg, imp string }{
		{"system1/internal/fleet", "system1/internal/engine/llamacpp"},
		{"system1/internal/engine/llamacpp", "system1/internal/engine/openai"},
		{"system1/bench/overhead", "system1/internal/engine/llamacpp"},
		{"system1/internal/httpapi", "system1/internal/fleet"},
		{"system1/internal/gateway", "system1/internal/fleet"},
	} {
		if v := violations([]pkg{{ImportPath: c.pkg, Imports: []string{c.imp}}}); len(v) > 0 {
			t.Errorf("an allowed import is reported: %v", v)
		}
	}
}
