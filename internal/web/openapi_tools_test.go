package web_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// npmTool is a command that npm ci installed in test/openapi. Without it the
// test skips, unless SYSTEM1_REQUIRE_JS is set (scripts/test.sh sets it
// after npm ci), where it fails.
func npmTool(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "test", "openapi", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		why := name + " is not installed (run npm ci in test/openapi)"
		if os.Getenv("SYSTEM1_REQUIRE_JS") != "" {
			t.Fatalf("%s, and SYSTEM1_REQUIRE_JS is set", why)
		}
		t.Skip(why)
	}
	return p
}

// runTool runs a tool in dir, with no telemetry or update check (this
// machine's network is closed), and returns its output.
func runTool(t *testing.T, dir, bin string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	return cmd.CombinedOutput()
}

// openapi-typescript, with its default options, turns schema/openapi.json
// into TypeScript types that the README's own request and reply compile
// against under tsc --strict; requests that break the document (a
// question type that does not exist, a state that is a number, no
// questions) do not.
func TestOpenAPITypeScript(t *testing.T) {
	gen, tsc := npmTool(t, "openapi-typescript"), npmTool(t, "tsc")
	doc, err := filepath.Abs("../../schema/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if out, err := runTool(t, dir, gen, doc, "-o", "api.d.ts"); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	req, reply := readmeExample(t)
	programs := map[string]string{"readme.ts": string(req)}
	for _, bad := range []struct{ file, from, to string }{
		{"unknown-type.ts", `"type": "noul"`, `"type": "nou"`},
		{"state-number.ts", `"state": {"ticket": "I was charged twice for my subscription this month and want my money back."}`, `"state": 7`},
		{"no-questions.ts", `"questions"`, `"question"`},
	} {
		broken := strings.Replace(string(req), bad.from, bad.to, 1)
		if broken == string(req) {
			t.Fatalf("the README's request has no %s", bad.from)
		}
		programs[bad.file] = broken
	}
	files := []string{}
	for file, request := range programs {
		src := "import type { components } from \"./api\";\n" +
			"type Schemas = components[\"schemas\"];\n" +
			"export const request: Schemas[\"SystemOneRequest\"] = " + request + ";\n" +
			"export const reply: Schemas[\"SystemOneResponse\"] = " + string(reply) + ";\n"
		if err := os.WriteFile(filepath.Join(dir, file), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	// One tsc run over every program; its errors name their file.
	out, _ := runTool(t, dir, tsc, append([]string{"--noEmit", "--strict", "--target", "es2022", "--module", "esnext",
		"--moduleResolution", "bundler"}, files...)...)
	for file, request := range programs {
		failed := strings.Contains(string(out), file+"(")
		if file == "readme.ts" && failed {
			t.Errorf("the README's request and reply do not compile against the generated types:\n%s", out)
		}
		if file != "readme.ts" && !failed {
			t.Errorf("tsc accepted %s (%s):\n%s", request, file, out)
		}
	}
}

// acceptedWarnings are the warnings of redocly's recommended rules that
// the document keeps, each explained in docs/openapi.md: GET /health,
// GET /metrics and the probes take no key, body or parameter, so they
// have no 4XX to describe.
var acceptedWarnings = []string{
	"operation-4xx-response #/paths/~1health/get/responses",
	"operation-4xx-response #/paths/~1livez/get/responses",
	"operation-4xx-response #/paths/~1metrics/get/responses",
	"operation-4xx-response #/paths/~1readyz/get/responses",
}

// redocly lint with the recommended rules finds no error in
// schema/openapi.json, and no warning but those docs/openapi.md explains.
func TestOpenAPIRedocly(t *testing.T) {
	redocly := npmTool(t, "redocly")
	doc, err := filepath.Abs("../../schema/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	// In an empty folder, so that no redocly.yaml changes the rules.
	out, err := runTool(t, t.TempDir(), redocly, "lint", "--extends", "recommended", "--format", "json", doc)
	start := strings.IndexByte(string(out), '{')
	var report struct {
		Totals   struct{ Errors, Warnings int }
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string
			Message  string
			Location []struct{ Pointer string }
		}
	}
	if start < 0 || json.NewDecoder(strings.NewReader(string(out[start:]))).Decode(&report) != nil {
		t.Fatalf("redocly lint (%v) wrote no JSON report:\n%s", err, out)
	}
	var warnings []string
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		if p.Severity == "error" {
			t.Errorf("error %s at %s: %s", p.RuleID, where, p.Message)
			continue
		}
		warnings = append(warnings, p.RuleID+" "+where)
		if !slices.Contains(acceptedWarnings, p.RuleID+" "+where) {
			t.Errorf("warning %s at %s: %s", p.RuleID, where, p.Message)
		}
	}
	if err != nil && report.Totals.Errors == 0 {
		t.Errorf("redocly lint failed without reporting an error: %v\n%s", err, out)
	}
	for _, w := range acceptedWarnings {
		if !slices.Contains(warnings, w) {
			t.Errorf("the accepted warning %q is gone: take it out of acceptedWarnings and docs/openapi.md", w)
		}
	}
}
