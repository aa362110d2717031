package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/mcpserver"
	"system1/internal/testbin"
)

// bin is the system1 binary, built once by TestMain for the MCP face.
var bin string

func TestMain(m *testing.M) {
	// The rows mostly wait, on timeouts and pauses, not on the CPU: unless
	// -parallel says otherwise, run more of them at once than the cores.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(max(runtime.GOMAXPROCS(0), 8)))
	}
	var err error
	if bin, err = testbin.Path(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testbin.Main(m)
}

// testPolicy is the router's default policy with a cooldown longer than
// any test, so that a node cooled by a row stays cooled while the row
// looks. A 429 cools a node for as long as it asked, whatever the policy.
var testPolicy = fleet.Policy{AllowedFails: fleet.DefaultPolicy.AllowedFails, Window: time.Hour, Cooldown: time.Hour}

// observer records the router's attempts as "node:outcome", in order.
// It has every method the router's Observer has had, so it satisfies it
// with or without Load.
type observer struct {
	mu       sync.Mutex
	attempts []string
}

func (o *observer) Attempt(node, _, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.attempts = append(o.attempts, node+":"+outcome)
}
func (o *observer) Failover(string)       {}
func (o *observer) Cooldown(string)       {}
func (o *observer) Load(string, int, int) {}

// take returns the attempts since the last take, runs of the same
// node:outcome collapsed into one (the questions of a request are tried
// on a node together), and forgets them.
func (o *observer) take() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Compact(o.attempts)
	o.attempts = nil
	return strings.Join(out, " ")
}

// fleetOf builds the real router over the nodes' configurations, as
// system1 serve does, with its own HTTP client.
func fleetOf(t testing.TB, cfgs []config.Node, obs *observer) (*fleet.Router, *http.Transport) {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	hc := &http.Client{Transport: tr}
	var nodes []*fleet.Node
	for _, c := range cfgs {
		n, err := fleet.NewNode(c, func(string) string { return "" }, hc)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	r := fleet.New(nodes, fleet.Options{Policy: testPolicy, Observer: obs})
	r.Refresh(context.Background())
	return r, tr
}

// state is the router's view of the named node.
func state(t testing.TB, r *fleet.Router, name string) fleet.State {
	t.Helper()
	for _, s := range r.States() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no node %s", name)
	return fleet.State{}
}

// system1 is a running system1 HTTP server over the real router, and
// everything a row needs to look at it and shut it down.
type system1 struct {
	URL    string
	router *fleet.Router
	obs    *observer
	client *http.Client

	closeOnce sync.Once
	closers   []func()
}

// serve runs the real HTTP server (httpapi, as system1 serve builds it)
// over a router of the nodes, with the given request deadline; decide,
// when set, is the gateway built over the same router, served at
// POST /v1/decide.
//
// The fleet is cfgs, in order, else the fakes' own configurations; the
// fakes close with the server.
func serve(t testing.TB, fakes []*node, cfgs []config.Node, deadline time.Duration, decide func(*fleet.Router) *gateway.Gateway) *system1 {
	t.Helper()
	if cfgs == nil {
		for _, n := range fakes {
			cfgs = append(cfgs, n.cfg)
		}
	}
	s := &system1{obs: &observer{}}
	router, tr := fleetOf(t, cfgs, s.obs)
	s.router = router
	opt := httpapi.Options{Answer: answer.New(answer.Options{Router: router}), Rounding: 2, RequestTimeout: deadline, Version: "faults"}
	if decide != nil {
		g := decide(router)
		if errs := g.ConfigErrors(); len(errs) > 0 {
			t.Fatalf("the gateway's configuration: %v", errs)
		}
		opt.Decide = g
	}
	srv := httptest.NewServer(httpapi.New(opt))
	ctr := &http.Transport{}
	s.URL, s.client = srv.URL, &http.Client{Transport: ctr}
	for _, n := range fakes { // first: hung handlers end
		s.closers = append(s.closers, n.close)
	}
	s.closers = append(s.closers, srv.Close, tr.CloseIdleConnections, ctr.CloseIdleConnections)
	t.Cleanup(s.close)
	return s
}

// close stops the server and the fakes and drops every idle connection.
func (s *system1) close() {
	s.closeOnce.Do(func() {
		for _, c := range s.closers {
			c()
		}
	})
}

// reply is a response, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// post sends body to path; an error is returned, not fatal, since a row
// may hang up on purpose.
func (s *system1) post(ctx context.Context, path, body string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (s *system1) mustPost(t testing.TB, path, body string) reply {
	t.Helper()
	r, err := s.post(context.Background(), path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eventually waits for cond, checking every few milliseconds, and fails
// after 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// running lists the goroutines that are running system1's code (any
// frame in system1/internal but the test support's: the fake engine's,
// and testbin's, in whose Main the tests run), with their stacks.
func running() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, "system1/internal/") && !strings.HasPrefix(line, "system1/internal/fakeengine.") && !strings.HasPrefix(line, "system1/internal/testbin.") {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// noneLeft checks that nothing is left behind once the caller has gone
// and the fakes are idle: no goroutine runs system1's code, and after
// closing the servers, the fakes and every idle connection, the process
// has no more goroutines than base, counted before the row started. Both
// are waited for (goroutines take a moment to return), up to 10 s.
func noneLeft(t testing.TB, s *system1, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for left := running(); len(left) > 0; left = running() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutine(s) still run system1's code:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.close()
	for n := runtime.NumGoroutine(); n > base; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after the row, %d before:\n%s", n, base, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mcpSession is the built binary running `system1 mcp` over cfg, with the
// Go SDK's client connected over its stdin and stdout.
type mcpSession struct {
	cs     *mcp.ClientSession
	stderr *testbin.Output
}

// startMCP starts system1 mcp over cfg. Fingerprints are off unless cfg
// sets the block: the canary a build's first use asks is traffic of
// system1's own, which the tests that count a provider's calls would take
// for the tool call's.
func startMCP(t testing.TB, cfg *config.Config) *mcpSession {
	t.Helper()
	if cfg.Fingerprint == (config.Fingerprint{}) {
		c := *cfg
		c.Fingerprint.Off = true
		cfg = &c
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp", "--config", path)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "CLAUDE_PLUGIN_DATA=" + filepath.Join(dir, "state")}
	s := &mcpSession{stderr: &testbin.Output{}}
	cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "faults", Version: "0"}, nil)
	s.cs, err = client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to system1 mcp: %v\n%s", err, s.stderr)
	}
	t.Cleanup(func() { _ = s.cs.Close() }) // closes stdin and waits for the process
	return s
}

// decide calls system1_decide and returns the result's JSON (the text
// content, which keeps the key order) and its isError flag.
func (s *mcpSession) decide(t testing.TB, args any) ([]byte, bool) {
	t.Helper()
	res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: mcpserver.ToolDecide, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v\nstderr:\n%s", mcpserver.ToolDecide, err, s.stderr)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%d content blocks", len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil || !jsonEqual([]byte(text.Text), structured) {
		t.Errorf("the structured content differs from the text: %s vs %s", structured, text.Text)
	}
	return []byte(text.Text), res.IsError
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
