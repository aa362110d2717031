// Package testbin builds the system1 binary for tests that drive it as its
// users do, once per test process, waits for a server it runs to be
// healthy, and finds the external programs tests run (Tool).
package testbin

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// dir holds the built binary, which Cleanup removes.
var dir string

// Path returns the system1 binary, built on the first call into a
// temporary folder that Cleanup removes.
var Path = sync.OnceValues(func() (path string, err error) {
	if dir, err = os.MkdirTemp("", "system1-bin-"); err != nil {
		return "", err
	}
	path = filepath.Join(dir, "system1")
	if out, err := exec.Command("go", "build", "-o", path, "system1/cmd/system1").CombinedOutput(); err != nil {
		return path, fmt.Errorf("go build system1/cmd/system1: %v\n%s", err, out)
	}
	return path, nil
})

// Binary returns the binary that Path builds, failing t when it does not
// build.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Cleanup removes the built binary; a TestMain calls it after the tests.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// Main runs a package's tests, removes the binary Path built for them and
// exits with their status: the end of the TestMain of a package that
// drives the binary.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Output collects what a process writes to stderr or stdout, safe for its
// writes and a test's reads at the same time.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a server the test starts on it.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// LoopbackAddr is FreeAddr failing t when there is no free port.
func LoopbackAddr(t testing.TB) string {
	t.Helper()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// WaitHealthy waits until GET base/health answers 200: the server is up
// and serving. It fails as WaitOK does.
func WaitHealthy(base string, exited <-chan struct{}, within time.Duration) error {
	return WaitOK(base+"/health", exited, within)
}

// WaitOK waits until GET url answers 200. It fails when exited is closed
// first (the process ended; nil when it cannot be known) or within
// passes. An https url is not verified: a test's certificate is its own.
func WaitOK(url string, exited <-chan struct{}, within time.Duration) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(within)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s: %v", url, within, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("the server exited before %s answered", url)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Run runs cmd with its stdout and stderr collected, and returns its exit
// status and both; err is a failure to run it, not a non-zero status.
func Run(cmd *exec.Cmd) (code int, stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code, err = ee.ExitCode(), nil
	}
	return code, out.String(), errOut.String(), err
}

// listening is the line system1 serve, and ReverseProxy, log once they listen.
var listening = regexp.MustCompile(`msg=listening url=(http://\S+)`)

// Listen starts cmd, a system1 serve on port 0 or a ReverseProxy, with
// its log written to a new file at logPath rather than through a pipe (so
// that a line logged per request wakes nothing in the measuring process),
// and waits, up to within, until the log says where it listens. It returns that URL and a
// channel closed once the process has exited; on an error the process is
// stopped and the log quoted.
func Listen(cmd *exec.Cmd, logPath string, within time.Duration) (base string, exited <-chan struct{}, err error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	deadline := time.Now().Add(within)
	for {
		log, _ := os.ReadFile(logPath)
		if m := listening.FindSubmatch(log); m != nil {
			return string(m[1]), done, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return "", nil, fmt.Errorf("%s did not listen within %s:\n%s", cmd.Path, within, log)
		}
		select {
		case <-done:
			log, _ = os.ReadFile(logPath)
			return "", nil, fmt.Errorf("%s exited before it listened:\n%s", cmd.Path, log)
		case <-time.After(10 * time.Millisecond): // polling a file: no channel reaches into another process
		}
	}
}

// ReverseProxy serves a bare reverse proxy (net/http/httputil) to the URL
// to on a free loopback port, and logs where it listens on stderr as
// system1 serve does, for Listen to read: the least any gateway process
// adds, which the benchmarks measure system1 beside. It keeps more idle
// connections to to than their loads open, so that it never dials
// mid-measurement. It returns only when serving fails.
func ReverseProxy(to string) error {
	u, err := url.Parse(to)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}
	fmt.Fprintf(os.Stderr, "msg=listening url=http://%s\n", ln.Addr())
	return http.Serve(ln, rp)
}

// StartReverseProxy runs this program again with args, which make it
// call ReverseProxy, its log in dir, and returns where it listens, its
// process, and stop, which kills it and waits.
func StartReverseProxy(dir string, args ...string) (base string, cmd *exec.Cmd, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	cmd = exec.Command(self, args...)
	base, exited, err := Listen(cmd, filepath.Join(dir, "reverse-proxy.log"), 30*time.Second)
	if err != nil {
		return "", nil, nil, fmt.Errorf("the bare reverse proxy: %w", err)
	}
	return base, cmd, func() { _ = cmd.Process.Kill(); <-exited }, nil
}

// Serve runs bin serve with args on a free loopback address (--listen)
// and waits, up to within, until it answers /health. It returns the
// server's base URL and its process, and stop, which kills the process
// and waits for it.
func Serve(bin string, within time.Duration, args ...string) (base string, cmd *exec.Cmd, stop func(), err error) {
	addr, err := FreeAddr()
	if err != nil {
		return "", nil, nil, err
	}
	cmd = exec.Command(bin, append(append([]string{"serve"}, args...), "--listen", addr)...)
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() { _ = cmd.Process.Kill(); <-exited }
	base = "http://" + addr
	if err := WaitHealthy(base, exited, within); err != nil {
		stop()
		return "", nil, nil, err
	}
	return base, cmd, stop, nil
}

// Do sends a request to url through c, with body as JSON when it is not
// empty and each header given as "Name: value", and reads the whole reply,
// failing t on any transport error: the HTTP client tests share.
func Do(t testing.TB, c *http.Client, method, url, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// Post sends body to url as JSON through c and reads the whole reply; a
// status other than 200 is an error that quotes the reply's start.
func Post(c *http.Client, url string, body io.Reader) ([]byte, error) {
	resp, err := c.Post(url, "application/json", body)
	return readReply(url, resp, err)
}

// Get reads url's whole reply, as Post does.
func Get(url string) ([]byte, error) {
	resp, err := http.Get(url)
	return readReply(url, resp, err)
}

func readReply(url string, resp *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: status %d: %.300s", url, resp.StatusCode, b)
	}
	return b, err
}

// Metrics reads a server's Prometheus samples at base/metrics, by name
// with its labels as written (llamacpp:prompt_tokens_total,
// system1_engine_attempts_total{node="a",outcome="ok"}).
func Metrics(base string) (map[string]float64, error) {
	b, err := Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		i := strings.LastIndexByte(line, ' ') // a label's value may hold spaces; no sample here has a timestamp
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = f
		}
	}
	return out, nil
}

// Tool returns the program $SYSTEM1_<NAME> names (env), checking that it
// and files exist; without them the test skips saying what is unavailable,
// why, and the script that builds it, or fails where SYSTEM1_REQUIRE_<NAME>=1.
func Tool(t testing.TB, what, env, script string, files ...string) string {
	t.Helper()
	bin := os.Getenv(env)
	missing := env + " is not set"
	if bin != "" {
		missing = ""
		for _, f := range append([]string{bin}, files...) {
			if _, err := os.Stat(f); err != nil {
				missing = err.Error()
			}
		}
	}
	if missing != "" {
		msg := fmt.Sprintf("%s unavailable: %s (build it with %s and set %s to the path it prints)", what, missing, script, env)
		if os.Getenv("SYSTEM1_REQUIRE_"+strings.TrimPrefix(env, "SYSTEM1_")) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}
