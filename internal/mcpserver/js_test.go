package mcpserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/mcpserver"
)

// The official TypeScript client (@modelcontextprotocol/sdk, pinned in
// test/js-mcp) drives the binary over stdio and validates every
// structured result against the tool's output schema. Needs node and
// `npm ci` in test/js-mcp; skips without them unless SYSTEM1_REQUIRE_JS=1.
func TestTypeScriptClient(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "test", "js-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node is not installed"
	default:
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
			missing = "test/js-mcp/node_modules is missing (run npm ci in test/js-mcp)"
		}
	}
	if missing != "" {
		if os.Getenv("SYSTEM1_REQUIRE_JS") == "1" {
			t.Fatal(missing)
		}
		t.Skip(missing + "; set SYSTEM1_REQUIRE_JS=1 to make this a failure")
	}
	ok := fakeengine.StartSystemOne(t, fakeengine.Reply{Probs: []float64{0.8, 0.15, 0.05}})
	w := newWorld(t, chain("", so("local", fakeengine.Down(t)), so("jev", ok.URL)))
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "mcp.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(w.env(), "SYSTEM1_BIN="+bin, "SYSTEM1_CONFIG="+w.config, "SYSTEM1_TOOLS="+strings.Join(mcpserver.Tools, ","))
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the TypeScript client's tests failed: %v", err)
	}
}
