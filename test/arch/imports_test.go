// Package arch_test holds the layering of docs/architecture.md to the
// code: every package of the module is in the allow-list of
// policy_test.go, and a test fails as soon as one imports what its row
// does not allow.
package arch_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "system1/"

// rule is one row of the policy: the packages it covers, what they may
// import besides the standard library, what of the standard library they
// may not, and why.
type rule struct {
	pkgs []string
	// may are the module's packages (without "system1/") and the
	// third-party modules (a module path covers its packages) the
	// packages may import.
	may []string
	// not is the standard library the packages may not import.
	not []string
	// test marks test support: packages only tests and benchmark
	// programs import, which may import the standard library's testing
	// packages.
	test bool
	why  string
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string // of its own files, tests left out
	Deps       []string
}

// packages lists every package of the module, with its imports.
func packages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"...")
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
	if len(all) < 30 {
		t.Fatalf("go list found only %d packages", len(all))
	}
	return all
}

// covers reports whether the rule's pattern covers path (both without
// "system1/").
func covers(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// ruleFor is the row that lists path, nil when none does.
func ruleFor(policy []rule, path string) *rule {
	for i := range policy {
		if slices.ContainsFunc(policy[i].pkgs, func(p string) bool { return covers(p, path) }) {
			return &policy[i]
		}
	}
	return nil
}

// standard reports whether an import path is the standard library's: its
// first element has no dot.
func standard(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// allows reports whether r lets its packages import imp, and why not.
func (r *rule) allows(imp string) (bool, string) {
	if own, ok := strings.CutPrefix(imp, module); ok {
		return slices.Contains(r.may, own), "not in its row of the policy"
	}
	if standard(imp) {
		switch {
		case slices.Contains(r.not, imp):
			return false, "the standard library's " + imp + " is forbidden in its row"
		case slices.Contains(testOnly, imp) && !r.test:
			return false, imp + " is for tests and test support"
		}
		return true, ""
	}
	return slices.ContainsFunc(r.may, func(m string) bool { return imp == m || strings.HasPrefix(imp, m+"/") }),
		"a third-party module not in its row of the policy"
}

// violations lists every package the policy does not list, every import a
// package's row does not allow, and every row that covers no package.
// Only the packages' own files count: tests may import what they need to
// drive a face as its users do.
func violations(policy []rule, all []pkg) []string {
	var out []string
	used := map[*rule]bool{}
	for _, p := range all {
		path := strings.TrimPrefix(p.ImportPath, module)
		r := ruleFor(policy, path)
		if r == nil {
			out = append(out, fmt.Sprintf("%s is not in the policy (test/arch/policy_test.go): add its row, with what it may import and why", path))
			continue
		}
		used[r] = true
		for _, imp := range p.Imports {
			if ok, why := r.allows(imp); !ok {
				out = append(out, fmt.Sprintf("%s imports %s: %s (%s)", path, strings.TrimPrefix(imp, module), why, r.why))
			}
		}
	}
	for i := range policy {
		if !used[&policy[i]] {
			out = append(out, fmt.Sprintf("the policy's row for %s covers no package of the module", strings.Join(policy[i].pkgs, ", ")))
		}
	}
	return out
}

// TestLayers fails when a package imports what its row does not allow, or
// is not in the policy.
func TestLayers(t *testing.T) {
	for _, v := range violations(policy, packages(t)) {
		t.Error(v)
	}
}

// What programOnly lists is linked by the program alone: no package of
// the module outside cmd (test support aside) depends on it, directly or
// not.
func TestProgramOnlyDeps(t *testing.T) {
	for _, p := range packages(t) {
		path := strings.TrimPrefix(p.ImportPath, module)
		if r := ruleFor(policy, path); covers("cmd/...", path) || r == nil || r.test {
			continue
		}
		for _, m := range programOnly {
			if i := slices.IndexFunc(p.Deps, func(d string) bool { return d == m || strings.HasPrefix(d, m+"/") }); i >= 0 {
				t.Errorf("%s depends on %s, which only the program may link", path, p.Deps[i])
			}
		}
	}
}

// The checker catches what it is meant to: each forbidden import, planted
// in a package that may not have it, is reported, and so are a package the
// policy does not list and a row that covers nothing; the module's real
// edges are not.
func TestLayersCatchForbiddenImports(t *testing.T) {
	// A world of every row's packages, importing nothing, so that only
	// what is planted can be reported.
	var world []pkg
	for _, r := range policy {
		for _, p := range r.pkgs {
			if base, ok := strings.CutSuffix(p, "/..."); ok {
				p = base + "/suite"
			}
			world = append(world, pkg{ImportPath: module + p})
		}
	}
	if v := violations(policy, world); len(v) > 0 {
		t.Fatalf("the policy's own packages, importing nothing, are reported: %v", v)
	}
	plant := func(path string, imports ...string) []string {
		w := slices.Clone(world)
		for i := range w {
			if w[i].ImportPath == module+path {
				w[i].Imports = imports
			}
		}
		return violations(policy, w)
	}
	for _, c := range []struct{ pkg, imp string }{
		{"internal/gateway", "system1/internal/engine"},
		{"internal/gateway", "system1/internal/engine/llamacpp"},
		{"internal/gateway", "system1/internal/systemone"},
		{"internal/gateway", "net/http"},
		{"internal/httpapi", "system1/internal/engine/openai"},
		{"internal/httpapi", "system1/internal/engine"},
		{"cmd/system1", "system1/internal/engine/ollama"},
		{"internal/mcpserver", "system1/internal/engine/llamacpp"},
		{"internal/mcpserver", "system1/internal/fleet"},
		{"internal/fleet", "system1/internal/decisionlog"},
		{"internal/fleet", "modernc.org/sqlite"},
		{"internal/decisionlog", "github.com/jackc/pgx/v5/stdlib"},
		{"internal/answer", "system1/internal/gateway"},
		{"internal/answer", "net/http"},
		{"internal/outcomes", "system1/internal/fleet"},
		{"internal/decision", "os"},
		{"internal/calibration", "os"},
		{"internal/calibration", "system1/internal/decisionlog"},
		{"internal/calibration", "system1/internal/calibration/fitting"},
		{"internal/engine", "system1/internal/fleet"},
		{"internal/systemone", "system1/internal/fleet"},
		{"internal/httpapi", "system1/internal/fakeengine"},
		{"internal/httpapi", "testing"},
		{"internal/web", "github.com/modelcontextprotocol/go-sdk/mcp"},
	} {
		if v := plant(c.pkg, c.imp); len(v) != 1 || !strings.HasPrefix(v[0], c.pkg+" imports ") {
			t.Errorf("%s importing %s: reported %q", c.pkg, c.imp, v)
		}
	}
	for _, c := range []struct{ pkg, imp string }{
		{"internal/fleet", "system1/internal/engine/llamacpp"},
		{"internal/fleet", "github.com/hashicorp/golang-lru/v2/simplelru"},
		{"internal/engine/llamacpp", "system1/internal/engine/openai"},
		{"bench/overhead", "system1/internal/fakeengine"},
		{"internal/httpapi", "system1/internal/answer"},
		{"internal/gateway", "system1/internal/answer"},
		{"cmd/system1", "modernc.org/sqlite"},
		{"internal/fakeengine", "net/http/httptest"},
		{"internal/decision", "encoding/json"},
	} {
		if v := plant(c.pkg, c.imp); len(v) > 0 {
			t.Errorf("an allowed import is reported: %v", v)
		}
	}
	if v := violations(policy, append(slices.Clone(world), pkg{ImportPath: module + "internal/newpkg"})); len(v) != 1 || !strings.Contains(v[0], "internal/newpkg is not in the policy") {
		t.Errorf("a package missing from the policy: reported %q", v)
	}
	stale := append(slices.Clone(policy), rule{pkgs: []string{"internal/gone"}})
	if v := violations(stale, world); len(v) != 1 || !strings.Contains(v[0], "internal/gone covers no package") {
		t.Errorf("a row for no package: reported %q", v)
	}
}

var update = flag.Bool("update", false, "rewrite docs/architecture.md's table from the policy")

// The table of docs/architecture.md is the policy's, written by
// `go test ./test/arch -update`: a reader sees the rules the code is held
// to, not a copy that drifts.
func TestArchitectureTableIsThePolicy(t *testing.T) {
	const path = "../../docs/architecture.md"
	const begin, end = "<!-- allow-list: written from test/arch/policy_test.go by go test ./test/arch -update -->\n", "<!-- end allow-list -->\n"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no %q ... %q block", path, begin, end)
	}
	want := before + begin + table(policy) + end + after
	if want == string(doc) {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's table is not the policy's; run go test ./test/arch -update. It should read:\n%s", path, table(policy))
}

// table writes the policy as docs/architecture.md shows it.
func table(policy []rule) string {
	var b strings.Builder
	b.WriteString("| package | may import (and the standard library) | why |\n|---|---|---|\n")
	for _, r := range policy {
		names := func(ps []string) string {
			q := make([]string, len(ps))
			for i, p := range ps {
				q[i] = "`" + strings.TrimPrefix(p, "internal/") + "`"
			}
			return strings.Join(q, ", ")
		}
		may := names(r.may)
		if may == "" {
			may = "nothing of the module"
		}
		switch {
		case slices.Equal(r.not, noIO):
			may += "; **no I/O**: not `os`, `net`, `database/sql`, a logger and the like"
		case len(r.not) > 0:
			may += "; **not** " + names(r.not)
		}
		if r.test {
			may += "; testing"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", names(r.pkgs), may, r.why)
	}
	return b.String()
}
