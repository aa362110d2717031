package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/gateway"
	"system1/internal/mcpserver"
	"system1/internal/testbin"
)

// bin is the system1 binary under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	var err error
	if bin, err = testbin.Path(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// world is one test's files: the configuration and the pause state
// folder, and the environment the binary runs in.
type world struct {
	t        *testing.T
	dir      string
	config   string
	stateDir string
}

// newWorld writes the configuration (YAML; empty writes no file at all).
func newWorld(t *testing.T, yaml string) *world {
	t.Helper()
	w := &world{t: t, dir: t.TempDir()}
	w.config = filepath.Join(w.dir, "config.yaml")
	w.stateDir = filepath.Join(w.dir, "plugin-data")
	if yaml != "" {
		w.write("config.yaml", yaml)
	}
	return w
}

func (w *world) write(name, content string) {
	w.t.Helper()
	if err := os.WriteFile(filepath.Join(w.dir, name), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// env is the binary's environment: a private home, the plugin data folder
// as Claude Code sets it, and nothing else of the test's.
func (w *world) env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.dir, "CLAUDE_PLUGIN_DATA=" + w.stateDir, "SYSTEM1_LOG_LEVEL=debug"}
}

// run runs a system1 command to completion.
func (w *world) run(args ...string) (stdout, stderr string, code int) {
	w.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = w.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			w.t.Fatal(err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// server is a running `system1 mcp` with a connected Go SDK client.
type server struct {
	t      *testing.T
	cs     *mcp.ClientSession
	cmd    *exec.Cmd
	stderr *testbin.Output
	tools  map[string]*mcp.Tool
	closed bool
}

// start runs `system1 mcp --config <file>` and connects the Go SDK's
// client over its stdin and stdout (CommandTransport).
func (w *world) start(extra ...string) *server {
	w.t.Helper()
	args := append([]string{"mcp", "--config", w.config}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = w.env()
	return newClient(w.t, cmd)
}

func newSDKClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "blackbox", Version: "0"}, nil)
}

func commandTransport(cmd *exec.Cmd) mcp.Transport { return &mcp.CommandTransport{Command: cmd} }

// close closes stdin and waits for the server to exit.
func (s *server) close() {
	if s.closed {
		return
	}
	s.closed = true
	_ = s.cs.Close()
}

// listTools lists the tools and keeps them for output checks.
func (s *server) listTools() []*mcp.Tool {
	s.t.Helper()
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tools = map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		s.tools[tool.Name] = tool
	}
	return res.Tools
}

// call calls a tool and checks the result as a strict client would: the
// structured content validates against the tool's listed output schema,
// and the text content is the same JSON. It returns the structured
// content as JSON.
func (s *server) call(name string, args any) (json.RawMessage, bool) {
	s.t.Helper()
	if s.tools == nil {
		s.listTools()
	}
	res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("calling %s: %v\nstderr:\n%s", name, err, s.stderr)
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil || res.StructuredContent == nil {
		s.t.Fatalf("%s: no structured content: %+v", name, res)
	}
	if len(res.Content) != 1 {
		s.t.Fatalf("%s: %d content blocks", name, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok || !jsonEqual(text.Text, string(structured)) {
		s.t.Errorf("%s: the text content differs from the structured content", name)
	}
	validate(s.t, s.tools[name].OutputSchema, structured)
	// The client decodes structuredContent into a map, which loses key
	// order; the text is the same JSON as sent.
	return json.RawMessage(text.Text), res.IsError
}

// decide calls system1_decide and decodes the response.
func (s *server) decide(args any) *gateway.Response {
	s.t.Helper()
	data, isErr := s.call(mcpserver.ToolDecide, args)
	var res gateway.Response
	if err := json.Unmarshal(data, &res); err != nil {
		s.t.Fatal(err)
	}
	if isErr != (res.Status == gateway.Failed) {
		s.t.Errorf("isError %v for status %s", isErr, res.Status)
	}
	checkResponse(s.t, &res, data)
	return &res
}

func (s *server) health() *gateway.Health {
	s.t.Helper()
	data, _ := s.call(mcpserver.ToolHealth, map[string]any{})
	var h gateway.Health
	if err := json.Unmarshal(data, &h); err != nil {
		s.t.Fatal(err)
	}
	return &h
}

func (s *server) capabilities() *gateway.Capabilities {
	s.t.Helper()
	data, _ := s.call(mcpserver.ToolCapabilities, map[string]any{})
	var c gateway.Capabilities
	if err := json.Unmarshal(data, &c); err != nil {
		s.t.Fatal(err)
	}
	return &c
}

// checkResponse holds for every decide response: a decision only when
// decided, one of the probabilities' options and with confidence its
// probability; no numbers on an error; never a null attempts list; the
// schema version; a rationale.
func checkResponse(t *testing.T, res *gateway.Response, raw []byte) {
	t.Helper()
	var top map[string]json.RawMessage
	_ = json.Unmarshal(raw, &top)
	if string(top["attempts"]) == "null" || res.SchemaVersion != "1" || res.RequestID == "" || res.Rationale == "" {
		t.Errorf("response %s", raw)
	}
	if (res.Status == gateway.Decided) != (res.Decision != nil) {
		t.Errorf("status %s with decision %v", res.Status, res.Decision)
	}
	if res.Decision != nil {
		p, ok := res.Probabilities.Get(*res.Decision)
		if !ok || res.Confidence == nil || p != *res.Confidence {
			t.Errorf("decision %q is not an option with confidence its probability: %s", *res.Decision, raw)
		}
	}
	if res.Status == gateway.Failed {
		_, hasP := top["probabilities"]
		_, hasC := top["confidence"]
		if hasP || hasC || res.Error == nil {
			t.Errorf("an error response carries numbers, or no error: %s", raw)
		}
	}
}

// validate checks data against a schema as listed by tools/list.
func validate(t *testing.T, schema any, data []byte) {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if err := resolved.Validate(v); err != nil {
		t.Errorf("result fails the listed output schema: %v\n%s", err, data)
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// chain writes a configuration whose providers are the given YAML flow
// mappings. Tests of hanging providers give those a short timeout.
// Fingerprints are off (noCanary); fingerprinted turns them on.
func chain(gateway string, providers ...string) string {
	var b strings.Builder
	b.WriteString(noCanary + "gateway:\n  timeout: 5s\n")
	if gateway != "" {
		b.WriteString(gateway)
	}
	b.WriteString("providers:\n")
	for _, p := range providers {
		b.WriteString("  - " + p + "\n")
	}
	return b.String()
}

// noCanary turns fingerprints off: the canary a build's first use asks
// is traffic of system1's own, which the tests that count a provider's
// calls or read its last request would take for the tool call's.
const noCanary = "fingerprint: {off: true}\n"

// fingerprinted is cfg with fingerprints on, as they are by default.
func fingerprinted(cfg string) string { return strings.Replace(cfg, noCanary, "", 1) }

// so is a systemone provider entry.
func so(name, url string, extra ...string) string {
	s := fmt.Sprintf("{name: %s, kind: systemone, url: %q, model: jev-latest", name, url)
	for _, e := range extra {
		s += ", " + e
	}
	return s + "}"
}

// attempted lists the attempts' outcomes, by provider.
func attempted(res *gateway.Response) string {
	var out []string
	for _, a := range res.Attempts {
		out = append(out, a.Provider+":"+a.Outcome)
	}
	return strings.Join(out, " ")
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}
