package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"system1/internal/testbin"
	"testing"
	"time"
)

// The tests share one binary, built on first use and removed by TestMain.
func TestMain(m *testing.M) {
	testbin.Main(m)
}

// logBuffer keeps everything a process writes to stderr, line by line,
// and wakes waiters at each line.
type logBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced at every line
}

func (l *logBuffer) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line)
	l.b.WriteByte('\n')
	close(l.changed)
	l.changed = make(chan struct{})
}

// Write appends raw output, for a process's Stderr.
func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) snapshot() (string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.changed
}

// server is a running system1 serve.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	log    *logBuffer
	exited chan struct{} // closed once the process is waited for
	err    error         // Wait's error, set before exited closes
	URL    string        // the plain listener, http://host:port
}

// serveOpts say how to start system1 serve.
type serveOpts struct {
	// Env are extra NAME=value variables for the process.
	Env []string
	// TLS is the address of the configuration's HTTPS listener, waited
	// for too; empty when it has none.
	TLS string
}

// startServe writes cfg to a file and starts system1 serve on a free
// loopback port with debug logging, returning once its /health answers. When the test ends the process is interrupted (killed after a
// minute) and waited for; its whole log is shown if the test failed.
func startServe(t *testing.T, cfg string, o serveOpts) *server {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "system1.yaml")
	writeFile(t, path, withoutCanary(cfg))
	addr := testbin.LoopbackAddr(t)
	cmd := exec.Command(testbin.Binary(t), "serve", "--config", path, "--listen", addr)
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir, "SYSTEM1_LOG_LEVEL=debug")
	cmd.Env = append(cmd.Env, o.Env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, log: &logBuffer{changed: make(chan struct{})}, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			s.log.add(sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-s.exited:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-s.exited
			}
		}
		if t.Failed() {
			t.Logf("system1 serve log:\n%s", s.log.String())
		}
	})
	s.URL = "http://" + addr
	bases := []string{s.URL}
	if o.TLS != "" {
		bases = append(bases, "https://"+o.TLS)
	}
	for _, b := range bases {
		if err := testbin.WaitHealthy(b, s.exited, 30*time.Second); err != nil {
			t.Fatalf("system1 serve: %v (%v):\n%s", err, s.err, s.log.String())
		}
	}
	return s
}

// waitLog waits until the log has at least n matches of re and returns
// them; it fails the test if the process exits first or within passes.
func (s *server) waitLog(t *testing.T, re *regexp.Regexp, n int, within time.Duration) [][]string {
	t.Helper()
	deadline := time.After(within)
	for {
		text, changed := s.log.snapshot()
		if m := re.FindAllStringSubmatch(text, -1); len(m) >= n {
			return m
		}
		select {
		case <-changed:
		case <-s.exited:
			text = s.log.String()
			if m := re.FindAllStringSubmatch(text, -1); len(m) >= n {
				return m
			}
			t.Fatalf("system1 serve exited (%v) before its log had %d lines matching %s:\n%s", s.err, n, re, text)
		case <-deadline:
			t.Fatalf("system1 serve's log had no %d lines matching %s within %s", n, re, within)
		}
	}
}

// signal sends sig to the process.
func (s *server) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit status; a
// process still running after within is killed and fails the test.
func (s *server) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(within):
		_ = s.cmd.Process.Kill()
		<-s.exited
		t.Fatalf("system1 serve did not exit within %s", within)
	}
	var ee *exec.ExitError
	switch {
	case s.err == nil:
		return 0
	case errors.As(s.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("system1 serve was killed by %s", ws.Signal())
		}
		return ee.ExitCode()
	}
	t.Fatalf("waiting for system1 serve: %v", s.err)
	return -1
}

// reply is a complete HTTP answer.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// do sends a request and reads the whole answer, failing the test on any
// transport error. key, when not empty, is sent as a bearer key.
func do(t *testing.T, c *http.Client, method, u, key, body string) reply {
	t.Helper()
	r, err := try(c, method, u, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return r
}

// try is do returning the error.
func try(c *http.Client, method, u, key, body string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{Status: resp.StatusCode, Header: resp.Header}, fmt.Errorf("reading the body of a %d: %w", resp.StatusCode, err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// client is an HTTP client bounded well past anything the tests wait
// for, so that a hang fails rather than blocks.
func client() *http.Client { return &http.Client{Timeout: time.Minute} }

// choice is a one-question /v1/systemone request over state.
func choice(model, state string) string {
	return fmt.Sprintf(`{"model":%q,"state":%q,"questions":{"dept":{"type":"choice","criteria":{"billing":null,"technical":null,"sales":null}}}}`, model, state)
}

// gate stands in front of a fake engine and holds every inference call
// until the test opens it, so that "a call is in flight" is a state the
// test sets up and observes, not a race against the engine's latency.
type gate struct {
	URL string
	// Arrived receives the body of each inference call as it arrives.
	Arrived chan string
	open    chan struct{}
	once    sync.Once
}

// newGate starts a gate in front of the engine at target (dialect
// llamacpp or openai: inference is POST /v1/chat/completions). Other
// calls, such as model lists, pass at once. The gate opens when the test
// ends, if it has not been opened before.
func newGate(t *testing.T, target string) *gate {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{Arrived: make(chan string, 1024), open: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			g.Arrived <- string(body)
			select {
			case <-g.open:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	g.URL = srv.URL
	t.Cleanup(func() {
		g.Open()
		srv.Close()
	})
	return g
}

// Open lets every held call and every later one through.
func (g *gate) Open() { g.once.Do(func() { close(g.open) }) }

// await receives n arrivals, failing the test if they do not come within
// a generous bound.
func (g *gate) await(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case b := <-g.Arrived:
			got = append(got, b)
		case <-deadline:
			t.Fatalf("%d of %d inference calls reached the engine within 30s", len(got), n)
		}
	}
	return got
}

// answered checks that a reply is a complete 200 answer to choice(): the
// first option wins, as the fake engine's default distribution says.
func answered(r reply) error {
	if r.Status != http.StatusOK {
		return fmt.Errorf("status %d: %s", r.Status, r.Body)
	}
	var body struct {
		Answers map[string]struct {
			Choice        string             `json:"choice"`
			Probabilities map[string]float64 `json:"probabilities"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return fmt.Errorf("the 200 body is not JSON (%v): %q", err, r.Body)
	}
	a, ok := body.Answers["dept"]
	if !ok || a.Choice != "billing" || len(a.Probabilities) != 3 {
		return fmt.Errorf("the 200 body is not the expected answer: %s", r.Body)
	}
	return nil
}

// errorMessage is the message of a system1 error body, or "" if the body
// is not one.
func errorMessage(body []byte) (typ, msg string) {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	return e.Error.Type, e.Error.Message
}

// withoutCanary turns fingerprinting off in cfg unless cfg sets it: the
// background probe's canary is engine traffic of system1's own, which
// the tests that count an engine's calls or hold its slots behind a gate
// would take for a request's (fingerprint_test.go sets the block).
func withoutCanary(cfg string) string {
	if regexp.MustCompile(`(?m)^fingerprint:`).MatchString(cfg) {
		return cfg
	}
	if cfg != "" && !strings.HasSuffix(cfg, "\n") {
		cfg += "\n"
	}
	return cfg + "fingerprint: {off: true}\n"
}
