package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// outcome is what one client got for one request.
type outcome struct {
	state string
	r     reply
	err   error
}

// fire sends one /v1/systemone request per state, concurrently, each on
// a connection of its own (no keep-alive, so that no request is sent on
// an idle connection the server is closing: that race is HTTP/1.1's, not
// the server's), and returns a channel of their outcomes.
func fire(base string, states []string) <-chan outcome {
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	out := make(chan outcome, len(states))
	for _, st := range states {
		go func() {
			r, err := try(c, "POST", base+"/v1/systemone", "", choice("fake", st))
			out <- outcome{state: st, r: r, err: err}
		}()
	}
	return out
}

func collect(t *testing.T, ch <-chan outcome, n int) []outcome {
	t.Helper()
	var got []outcome
	for range n {
		select {
		case o := <-ch:
			got = append(got, o)
		case <-time.After(2 * time.Minute): // past the clients' own one-minute bound
			t.Fatalf("%d of %d requests never returned", n-len(got), n)
		}
	}
	return got
}

func states(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// refused reports whether err is a connection the server never accepted.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

var requestLine = regexp.MustCompile(`msg=request .*method=POST path=/v1/systemone status=(\d+)`)

// On SIGTERM, system1 serve stops accepting connections, finishes the
// requests in flight and exits 0, and every request sent around the
// signal gets a complete answer or a clean refusal.
//
// A gate in front of the engine (latency 500 ms behind it) holds the
// first wave of 20 requests, so that all 20 are in flight when the signal
// is sent. A second wave of 10 is sent right after the signal, racing the
// listener's close: each may be answered or refused, but a response must
// be complete and a failure must carry no response at all. Once the
// plain listener refuses connections (while the first wave is still
// held), a third wave of 10 must be refused outright. Then the gate
// opens: the first wave must be answered in full with 200, the process
// must log that it stopped and exit 0, and the server must have logged
// exactly as many /v1/systemone requests as the clients got responses
// (none was handled and then lost on the wire).
func TestGracefulShutdown(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{Latency: 500 * time.Millisecond})
	g := newGate(t, f.URL)
	s := startServe(t, "timeouts: {drain: 1m}\nnodes:\n"+engineNode("engine", g.URL, "fake", ""), serveOpts{})

	wave1 := fire(s.URL, states("first", 20))
	held := g.await(t, 20)
	s.signal(t, syscall.SIGTERM)
	wave2 := fire(s.URL, states("second", 10))

	s.waitLog(t, regexp.MustCompile(`msg="shutting down`), 1, 30*time.Second)
	waitRefused(t, strings.TrimPrefix(s.URL, "http://"))
	third := collect(t, fire(s.URL, states("third", 10)), 10)
	g.Open()

	first := collect(t, wave1, 20)
	second := collect(t, wave2, 10)
	if code := s.wait(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGTERM; want 0", code)
	}

	responses := 0
	for _, o := range first {
		if o.err != nil {
			t.Errorf("%s, in flight at the signal: %v", o.state, o.err)
			continue
		}
		responses++
		if err := answered(o.r); err != nil {
			t.Errorf("%s, in flight at the signal: %v", o.state, err)
		}
	}
	reached := strings.Join(held, "\n") // every inference call that reached the engine
	for drained := false; !drained; {
		select {
		case b := <-g.Arrived:
			reached += "\n" + b
		default:
			drained = true
		}
	}
	for _, o := range second {
		switch {
		case o.err == nil:
			responses++
			if o.r.Status == http.StatusOK {
				if err := answered(o.r); err != nil {
					t.Errorf("%s, sent after the signal: %v", o.state, err)
				}
			} else if typ, _ := errorMessage(o.r.Body); typ == "" {
				t.Errorf("%s, sent after the signal: %d with a body that is not an error: %q", o.state, o.r.Status, o.r.Body)
			}
		case o.r.Status != 0:
			t.Errorf("%s, sent after the signal: a %d cut off mid-body: %v", o.state, o.r.Status, o.err)
		case strings.Contains(reached, o.state):
			t.Errorf("%s, sent after the signal, reached the engine but got no response: %v", o.state, o.err)
		case errors.Is(o.err, os.ErrDeadlineExceeded) || strings.Contains(o.err.Error(), "Client.Timeout"):
			t.Errorf("%s, sent after the signal, hung: %v", o.state, o.err)
		}
	}
	for _, o := range third {
		if !refused(o.err) {
			t.Errorf("%s, sent once the listener was closed: %v %d %s; want connection refused", o.state, o.err, o.r.Status, o.r.Body)
		}
	}

	log := s.log.String()
	if !strings.Contains(log, `msg="shutting down`) || !strings.Contains(log, "msg=stopped") {
		t.Errorf("the log does not say it is shutting down and stopped")
	}
	if n := len(requestLine.FindAllString(log, -1)); n != responses {
		t.Errorf("the server logged %d /v1/systemone requests; the clients got %d responses", n, responses)
	}
}

// waitRefused polls addr until it refuses connections, failing the test
// if it still accepts them after 30 s.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		switch {
		case err == nil:
			conn.Close()
		case refused(err):
			return
		case errors.Is(err, syscall.ECONNRESET):
			// A connection queued as the listener closed is reset: the
			// listener is going, so look again.
		default:
			t.Fatalf("dialling %s: %v", addr, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepted connections 30s after SIGTERM", addr)
		}
		time.Sleep(10 * time.Millisecond) // polling for the listener's close
	}
}

// SIGTERM closes every listener at once: while a request on the plain
// listener is still in flight (held at the gate), the TLS listener
// already refuses connections, rather than accepting them until the
// plain listener has drained. The held request is then answered and the
// process exits 0.
func TestShutdownClosesEveryListener(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	g := newGate(t, f.URL)
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	tlsAddr := testbin.LoopbackAddr(t)
	s := startServe(t, fmt.Sprintf(`timeouts: {drain: 1m}
tls: {cert: %s, key: %s, listen: %s}
nodes:
%s`, certFile, keyFile, tlsAddr, engineNode("engine", g.URL, "fake", "")), serveOpts{TLS: tlsAddr})

	pending := fire(s.URL, []string{"held"})
	g.await(t, 1)
	s.signal(t, syscall.SIGTERM)
	waitRefused(t, tlsAddr)
	waitRefused(t, strings.TrimPrefix(s.URL, "http://"))
	g.Open()
	if o := collect(t, pending, 1)[0]; o.err != nil {
		t.Errorf("the request in flight: %v", o.err)
	} else if err := answered(o.r); err != nil {
		t.Errorf("the request in flight: %v", err)
	}
	if code := s.wait(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGTERM; want 0", code)
	}
}

// SIGHUP (the terminal serve was started from closing, a kill -HUP)
// stops serve as SIGTERM does: the request in flight is answered, then
// the process exits 0, where it would die at once with the answers its
// decision log had queued.
func TestHangupDrainsAsTermDoes(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	g := newGate(t, f.URL)
	s := startServe(t, "timeouts: {drain: 1m}\nnodes:\n"+engineNode("engine", g.URL, "fake", ""), serveOpts{})

	pending := fire(s.URL, []string{"held"})
	g.await(t, 1)
	s.signal(t, syscall.SIGHUP)
	s.waitLog(t, regexp.MustCompile(`msg="shutting down`), 1, 30*time.Second)
	g.Open()
	if o := collect(t, pending, 1)[0]; o.err != nil {
		t.Errorf("the request in flight: %v", o.err)
	} else if err := answered(o.r); err != nil {
		t.Errorf("the request in flight: %v", err)
	}
	if code := s.wait(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGHUP; want 0", code)
	}
}

// With the engine slower than timeouts.drain, SIGTERM still ends the
// process soon after the drain timeout: the request still in flight is
// cancelled and its caller gets a complete 503, not a cut connection;
// the log says the drain timed out; and the exit status is 1, so that a
// supervisor sees that the drain did not finish.
func TestDrainTimeout(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	g := newGate(t, f.URL) // never opened while the server runs: the engine is as slow as it gets
	s := startServe(t, "timeouts: {drain: 1s}\nnodes:\n"+engineNode("engine", g.URL, "fake", ""), serveOpts{})

	pending := fire(s.URL, []string{"slow"})
	g.await(t, 1)
	s.signal(t, syscall.SIGTERM)
	code := s.wait(t, time.Minute) // a drain of 1s: a minute is a hang
	o := collect(t, pending, 1)[0]

	if code != 1 {
		t.Errorf("exit status %d after the drain timed out; want 1", code)
	}
	if o.err != nil {
		t.Errorf("the request in flight past the drain: %v; want a complete 503", o.err)
	} else if typ, _ := errorMessage(o.r.Body); o.r.Status != http.StatusServiceUnavailable || typ == "" {
		t.Errorf("the request in flight past the drain: %d %s; want a 503 error", o.r.Status, o.r.Body)
	}
	log := s.log.String()
	if !strings.Contains(log, "drain timeout") || strings.Contains(log, "msg=stopped") {
		t.Errorf("the log does not say the drain timed out (or says it stopped cleanly)")
	}
}

// system1 mcp exits 0 on its own when the client closes stdin, after an
// initialize exchange and with nothing sent at all. No signal is sent:
// the MCP SDK's client (used by internal/mcpserver's tests) sends SIGTERM
// to a server that has not exited 5 s after stdin closed, and the server
// exits 0 on a signal too, so only a test without the SDK tells the two
// apart; the log line says which it was.
func TestMCPExitsWhenStdinCloses(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "system1.yaml")
	writeFile(t, cfg, "providers:\n  - {name: jev, kind: systemone, url: http://127.0.0.1:9, model: jev-latest}\n")
	for _, initialize := range []bool{true, false} {
		t.Run(fmt.Sprintf("initialize=%v", initialize), func(t *testing.T) {
			cmd := exec.Command(testbin.Binary(t), "mcp", "--config", cfg)
			dir := t.TempDir()
			cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir, "XDG_CONFIG_HOME="+dir)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr := &logBuffer{changed: make(chan struct{})}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			exited := make(chan struct{})
			go func() { waitErr = cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				select {
				case <-exited:
				default:
					_ = cmd.Process.Kill()
					<-exited
				}
			})
			if initialize {
				_, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`+"\n")
				if err != nil {
					t.Fatal(err)
				}
				line, err := bufio.NewReader(stdout).ReadString('\n')
				if err != nil || !strings.Contains(line, `"id":1`) || !strings.Contains(line, `"result"`) {
					t.Fatalf("initialize: %q, %v", line, err)
				}
			}
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			stdin.Close()
			select {
			case <-exited:
				if waitErr != nil {
					t.Errorf("system1 mcp after stdin closed: %v; want exit status 0\n%s", waitErr, stderr.String())
				}
			case <-time.After(time.Minute):
				t.Fatalf("system1 mcp still runs a minute after stdin closed\n%s", stderr.String())
			}
			if log := stderr.String(); !strings.Contains(log, "the client closed stdin") || strings.Contains(log, "by a signal") {
				t.Errorf("the log does not say the client closed stdin:\n%s", log)
			}
		})
	}
}

// SIGTERM while serve waits for its decision log to open (a PostgreSQL
// server that took the connection and does not answer) stops it there:
// exit 0, saying it was stopped while starting, without logging the log
// unavailable (it was not given the time to open) or listening on its
// port a moment before shutting down.
func TestSignalWhileTheDecisionLogOpens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // taken, never answered
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	f := fakeEngine(t, fakeengine.Behavior{})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "system1.yaml")
	writeFile(t, cfg, withoutCanary("nodes:\n"+engineNode("engine", f.URL, "fake", "")+
		fmt.Sprintf("decision_log: {url: \"postgres://u:p@%s/db?sslmode=disable\"}\n", ln.Addr())))
	cmd := exec.Command(testbin.Binary(t), "serve", "--config", cfg, "--listen", testbin.LoopbackAddr(t))
	cmd.Env = append(env("SYSTEM1_", "XDG_", "CLAUDE_"), "XDG_STATE_HOME="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-accepted:
		accepted <- c // closed at the end
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("serve never connected to its decision log\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	log := stderr.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(log, "stopped by a signal") ||
		strings.Contains(log, "decision log unavailable") || strings.Contains(log, "msg=listening") {
		t.Fatalf("SIGTERM while the decision log opens: exit %d\n%s", code, log)
	}
}
