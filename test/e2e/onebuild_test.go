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
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"system1/internal/gateway"
	"system1/internal/mcpserver"
	"system1/internal/testbin"
	"system1/internal/testengine"
)

// serve, decide and mcp of one configuration name a real llama-server's
// build alike while serve is kept busy: serve names the build first and
// keeps it in the builds file beside the fits; each fresh decide and mcp
// process then reads the canary beside the load, a little otherwise than
// serve did, and takes that build's id (docs/fingerprints.md, "The same
// build in every process"). The suite runs 3 rounds; the issue's
// measurement, 50, runs with SYSTEM1_MEASURE=1 (SYSTEM1_MEASURE_RUNS sets
// another count), and then a control beside it: the same runs without a
// builds file, each process naming the build by its own reading, which
// says whether the load moved the readings at all.
func TestOneBuildInEveryProcessBesideABusyServe(t *testing.T) {
	needEngine(t, "SYSTEM1_LLAMA_SERVER", testengine.Binary())
	rounds, control := 3, false
	if os.Getenv("SYSTEM1_MEASURE") != "" {
		rounds, control = 50, true
		if s := os.Getenv("SYSTEM1_MEASURE_RUNS"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("SYSTEM1_MEASURE_RUNS=%q: want a count of runs", s)
			}
			rounds = n
		}
	}
	engine := testengine.Start(t, 4)
	t.Run("builds file", func(t *testing.T) { namesOneBuild(t, engine.URL, rounds, true) })
	if control {
		t.Run("no builds file", func(t *testing.T) { namesOneBuild(t, engine.URL, rounds, false) })
	}
}

// namesOneBuild starts serve beside the llama-server at url, keeps it
// busy, and runs decide and mcp rounds times each beside it, counting the
// runs that name serve's build; with kept the configuration has a fits
// file and so a builds file beside it, and every run must name serve's
// build; without, the counts are only reported.
func namesOneBuild(t *testing.T, url string, rounds int, kept bool) {
	dir := t.TempDir()
	model := testengine.Model
	fits := ""
	if kept {
		fits = "  fits: " + filepath.Join(dir, "fits.json") + "\n"
		writeFitsFile(t, filepath.Join(dir, "fits.json"), "empty")
	}
	cfg := fmt.Sprintf(`nodes:
  - {name: n1, url: %s, dialect: llamacpp, models: [%s], timeout: 120s}
fingerprint: {canary_every: 2s}
gateway:
%s  threshold: 0
  timeout: 120s
  deadline: 240s
  chain:
    - {name: local, model: %s}
decision_log: {off: true}
`, url, model, fits, model)
	s := startServe(t, cfg, serveOpts{})
	var first string
	for deadline := time.Now().Add(3 * time.Minute); first == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no fingerprint in /health within 3 minutes: %s", do(t, client(), http.MethodGet, s.URL+"/health", "", "").Body)
		}
		first = s.build(t, model).ID
	}
	if _, err := os.Stat(filepath.Join(dir, "builds.json")); kept && err != nil {
		t.Fatalf("serve named build %s but kept no builds file: %v", first, err)
	}
	miss := t.Errorf
	if !kept {
		miss = t.Logf
	}

	load := keepBusy(t, s.URL, 2)
	defer load.stop()
	path := filepath.Join(dir, "system1.yaml")
	writeFile(t, path, cfg)
	var decideSame, mcpSame int
	for i := range rounds {
		d := cliDecide(t, cfg)
		m := mcpDecide(t, path, dir)
		if d.Served != nil && d.Served.Fingerprint == first {
			decideSame++
		} else {
			miss("run %d: system1 decide named build %+v, serve %s", i+1, d.Served, first)
		}
		if m.Served != nil && m.Served.Fingerprint == first {
			mcpSame++
		} else {
			miss("run %d: system1 mcp named build %+v, serve %s", i+1, m.Served, first)
		}
		if served := load.last(); served != first {
			t.Errorf("run %d: serve's latest answer named build %s, its first %s", i+1, served, first)
		}
	}
	answers, others := load.stop()
	if err := load.failure(); err != nil {
		t.Errorf("the load beside the runs: %v", err)
	}
	if others != 0 {
		t.Errorf("%d of serve's %d answers beside the runs named another build than %s", others, answers, first)
	}
	t.Logf("beside a busy serve (%d answers to 2 clients, %d naming another build): system1 decide named serve's build %s in %d of %d runs, system1 mcp in %d of %d",
		answers, others, first, decideSame, rounds, mcpSame, rounds)
}

// busyServe is clients that keep asking a serve's /v1/decide other
// states, noting the build each answer names.
type busyServe struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	latest string
	total  int
	first  string
	others int
	err    error
}

// keepBusy starts k clients asking base's /v1/decide and returns once
// each has had an answer, so that the load runs whatever the machine's
// speed.
func keepBusy(t *testing.T, base string, k int) *busyServe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &busyServe{cancel: cancel}
	var started sync.WaitGroup
	started.Add(k)
	for i := range k {
		b.wg.Go(func() {
			once := sync.OnceFunc(started.Done)
			defer once()
			c := client()
			for n := 0; ctx.Err() == nil; n++ {
				body := fmt.Sprintf(`{"question":"Does the customer ask for a refund?","context":{"ticket":"load %d from client %d: the invoice shows the wrong address"}}`, n, i)
				r, err := try(c, http.MethodPost, base+"/v1/decide", "", body)
				var res gateway.Response
				if err == nil {
					err = json.Unmarshal(r.Body, &res)
				}
				if err == nil && (r.Status != http.StatusOK || res.Served == nil) {
					err = fmt.Errorf("%d %s", r.Status, r.Body)
				}
				if ctx.Err() != nil {
					return
				}
				b.note(res, err)
				once()
			}
		})
	}
	started.Wait()
	if err := b.failure(); err != nil {
		b.stop()
		t.Fatalf("the load's first answers: %v", err)
	}
	t.Cleanup(func() { b.stop() })
	return b
}

func (b *busyServe) note(res gateway.Response, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.err = err
		return
	}
	b.total++
	b.latest = res.Served.Fingerprint
	if b.first == "" {
		b.first = b.latest
	} else if b.latest != b.first {
		b.others++
	}
}

func (b *busyServe) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// last is the build serve's latest answer named.
func (b *busyServe) last() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.latest
}

// stop ends the load and returns how many answers it had and how many
// named another build than its first.
func (b *busyServe) stop() (answers, others int) {
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, b.others
}

// mcpDecide asks system1 mcp, a process of its own over the configuration
// at path, the question cliDecide asks, through the MCP Go SDK's client.
func mcpDecide(t *testing.T, path, dir string) gateway.Response {
	t.Helper()
	cmd := exec.Command(testbin.Binary(t), "mcp", "--config", path)
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("system1 mcp: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolDecide, Arguments: map[string]any{
		"question": "Does the customer ask for a refund?", "context": map[string]string{"ticket": "never came"},
	}})
	if err != nil {
		t.Fatalf("system1 mcp %s: %v", mcpserver.ToolDecide, err)
	}
	data, err := json.Marshal(res.StructuredContent)
	var out gateway.Response
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil || res.IsError {
		t.Fatalf("system1 mcp %s: %v, error %v: %s", mcpserver.ToolDecide, err, res.IsError, data)
	}
	return out
}
