package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/mcpserver"
	"system1/internal/testbin"
	"system1/internal/testengine"
)

// serve, decide and mcp of one configuration name the build a real
// llama-server serves alike, beside a serve kept busy by clients whose
// requests share the engine's batches with every canary: each run of
// system1 decide and of system1 mcp, a process of its own that takes its
// own canary reading under that load, answers with serve's fingerprint,
// through the builds file serve wrote; and serve, re-reading its canary
// every 2s under the load, sees no change. $SYSTEM1_BUILD_RUNS sets the
// runs of each (default 10; the 50 take five times as long).
func TestServeDecideAndMCPNameOneBuildBesideABusyServe(t *testing.T) {
	needEngine(t, "SYSTEM1_LLAMA_SERVER", testengine.Binary())
	runs := 10
	if n, err := strconv.Atoi(os.Getenv("SYSTEM1_BUILD_RUNS")); err == nil && n > 0 {
		runs = n
	}
	const model = "tiny"
	eng := testengine.StartWith(t, testengine.Config{Alias: model, Slots: 4})
	dir := t.TempDir()
	builds := filepath.Join(dir, "builds.json")
	cfg := fmt.Sprintf(`nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s], timeout: 120s}
probe_every: 250ms
fingerprint: {canary_every: 2s, builds: %s}
gateway:
  threshold: 0
  timeout: 120s
  deadline: 240s
  chain:
    - {name: local, model: %s}
decision_log: {off: true}
`, eng.URL, model, builds, model)
	s := startServe(t, cfg, serveOpts{})
	c := client()

	var first fleet.Fingerprint
	for deadline := time.Now().Add(3 * time.Minute); first.ID == "" || !strings.Contains(string(readIfThere(builds)), first.ID); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no fingerprint in /health and the builds file within 3 minutes: %s", do(t, c, http.MethodGet, s.URL+"/health", "", "").Body)
		}
		first = s.build(t, model)
	}
	t.Logf("serve named the build %s", first.ID)

	// The load: clients asking serve other states, each with a reply
	// before the runs start.
	ctx, cancel := context.WithCancel(context.Background())
	var wg, started sync.WaitGroup
	var loaded, failed atomic.Int64
	const clients = 3
	started.Add(clients)
	for i := range clients {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				body := fmt.Sprintf(`{"question":"Which team handles it?","options":["billing","shipping","account"],"context":{"ticket":"load %d from client %d: the invoice shows the wrong address"}}`, n, i)
				if r, err := try(c, http.MethodPost, s.URL+"/v1/decide", "", body); err == nil && r.Status == http.StatusOK {
					loaded.Add(1)
				} else if ctx.Err() == nil {
					failed.Add(1)
				}
				if n == 0 {
					started.Done()
				}
			}
		})
	}
	started.Wait()
	defer func() { cancel(); wg.Wait() }()

	cliCfg := filepath.Join(dir, "system1.yaml")
	writeFile(t, cliCfg, cfg)
	same := map[string]int{}
	for i := range runs {
		for face, named := range map[string]func() string{
			"decide": func() string { return servedBy(t, cliDecide(t, cfg)) },
			"mcp":    func() string { return servedBy(t, mcpDecide(t, cliCfg)) },
		} {
			if id := named(); id == first.ID {
				same[face]++
			} else {
				t.Errorf("run %d: system1 %s named the build %s, serve %s", i+1, face, id, first.ID)
			}
		}
	}
	now := s.build(t, model)
	t.Logf("beside serve busy with %d clients (%d answers, %d failed): decide named serve's build in %d of %d runs, mcp in %d of %d; serve's own canary, read every 2s under the load, saw %d changes",
		clients, loaded.Load(), failed.Load(), same["decide"], runs, same["mcp"], runs, now.Changes)
	if now.ID != first.ID || now.Changes != 0 {
		t.Errorf("serve's build moved under the load: %+v, first %s", now, first.ID)
	}
	if failed.Load() > 0 {
		t.Errorf("%d of the load's requests failed", failed.Load())
	}
}

func readIfThere(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

func servedBy(t *testing.T, r gateway.Response) string {
	t.Helper()
	if r.Served == nil {
		t.Fatalf("an answer served by nothing: %+v", r)
	}
	return r.Served.Fingerprint
}

// mcpDecide runs system1 mcp over the configuration at path for one
// system1_decide call, the question cliDecide asks, and returns its
// answer.
func mcpDecide(t *testing.T, path string) gateway.Response {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testbin.Binary(t), "mcp", "--config", path)
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	stderr := &testbin.Output{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to system1 mcp: %v\n%s", err, stderr)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolDecide, Arguments: map[string]any{
		"question": "Does the customer ask for a refund?", "context": map[string]any{"ticket": "never came"},
	}})
	if err != nil || len(res.Content) != 1 {
		t.Fatalf("calling %s: %v, %+v\n%s", mcpserver.ToolDecide, err, res, stderr)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	var r gateway.Response
	if !ok || json.Unmarshal([]byte(text.Text), &r) != nil {
		t.Fatalf("%s answered %+v\n%s", mcpserver.ToolDecide, res.Content[0], stderr)
	}
	return r
}
