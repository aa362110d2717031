package mcpserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"system1/internal/fakeengine"
	"testing"
)

// The MCP Inspector's CLI (pinned in test/claude) lists the binary's
// tools with --strict, its schema-portability check, and finds nothing to
// warn about. Needs `npm ci` in test/claude; skips without it unless
// SYSTEM1_REQUIRE_JS=1.
func TestInspectorStrict(t *testing.T) {
	inspector, err := filepath.Abs(filepath.Join("..", "..", "test", "claude", "node_modules", ".bin", "mcp-inspector"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(inspector); err != nil {
		if os.Getenv("SYSTEM1_REQUIRE_JS") == "1" {
			t.Fatalf("the MCP Inspector is not installed (run npm ci in test/claude): %v", err)
		}
		t.Skipf("the MCP Inspector is not installed (run npm ci in test/claude): %v", err)
	}
	ep := fakeengine.StartSystemOne(t, fakeengine.Reply{})
	w := newWorld(t, chain("", so("jev", ep.URL)))
	cmd := exec.Command(inspector, "--cli", "--method", "tools/list", "--strict", "--", bin, "mcp")
	cmd.Env = append(w.env(), "SYSTEM1_CONFIG="+w.config)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-inspector --strict: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Warning:") || strings.Contains(stderr.String(), "Error:") {
		t.Errorf("mcp-inspector --strict warns:\n%s", stderr.String())
	}
	for _, tool := range []string{"system1_decide", "system1_health", "system1_capabilities", "system1_feedback"} {
		if !strings.Contains(string(out), `"name": "`+tool+`"`) {
			t.Errorf("the Inspector lists no %s:\n%s", tool, out)
		}
	}
}
