package httpapi_test

import (
	"cmp"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/decisionlog"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/outcomes"
	"system1/internal/testengine"
)

// relayedPostgres is the test's schema in the PostgreSQL server the suite
// runs (testengine.PostgresSchema), reached through a TCP relay on a local
// port, and stop, which closes the relay and every connection through it:
// a database that went away after serve started.
func relayedPostgres(t *testing.T) (u *url.URL, stop func()) {
	u, err := url.Parse(testengine.PostgresSchema(t, "t_"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	network, target := "tcp", u.Host
	if dir := q.Get("host"); strings.HasPrefix(dir, "/") { // a socket folder, as scripts/postgres.sh gives
		network, target = "unix", filepath.Join(dir, ".s.PGSQL."+cmp.Or(q.Get("port"), u.Port(), "5432"))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial(network, target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	stop = func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(stop)
	q.Del("host")
	q.Del("port")
	u.Host, u.RawQuery = ln.Addr().String(), q.Encode()
	return u, stop
}

// A decision log that cannot be read is a 503 on every route that reads
// it, whose body names neither the database's user nor its address nor
// its host name, as no body names a node's: pgx's error names all three.
// The request's log line keeps the error for the operator.
func TestDecisionLogErrorNamesNoAddress(t *testing.T) {
	u, stop := relayedPostgres(t)
	dlog, err := decisionlog.Open(t.Context(), decisionlog.Options{URL: u.String(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dlog.Close(t.Context()) })
	stop()
	// The pool's connections are gone; a read dials again and fails.
	for i := 0; ; i++ {
		_, err := dlog.Usage(t.Context(), time.Now().Add(-time.Hour), time.Now(), nil)
		if err != nil && strings.Contains(err.Error(), "failed to connect") {
			t.Logf("the log's error: %v", err)
			break
		}
		if i == 10 {
			t.Fatalf("reading the log: %v, want a failure to connect", err)
		}
	}
	var logged strings.Builder
	var logMu sync.Mutex
	svc := answer.New(answer.Options{Router: fleet.New(nil, fleet.Options{Policy: testPolicy})})
	api := httpapi.New(httpapi.Options{Answer: svc, DecisionLog: dlog, Feedback: outcomes.NewFeedback(dlog),
		Log: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil))})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/calibration", ""},
		{"GET", "/v1/shadow", ""},
		{"GET", "/v1/usage", ""},
		{"POST", "/v1/feedback", `{"request_id":"req_1","question":"q1","outcome":"a"}`},
	} {
		logMu.Lock()
		logged.Reset()
		logMu.Unlock()
		req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d %s, want 503", c.method, c.path, resp.StatusCode, body)
		}
		for _, secret := range []string{u.User.Username(), u.Hostname(), u.Port()} {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s %s: the body names %q: %s", c.method, c.path, secret, body)
			}
		}
		logMu.Lock()
		if !strings.Contains(logged.String(), "failed to connect") {
			t.Errorf("%s %s: the request's log line lacks the error: %s", c.method, c.path, logged.String())
		}
		logMu.Unlock()
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
