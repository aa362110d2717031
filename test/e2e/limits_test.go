package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// engineNode is a node entry for a llamacpp engine at url serving model.
func engineNode(name, url, model, extra string) string {
	return fmt.Sprintf(`  - name: %s
    url: %s
    dialect: llamacpp
    models: [%s]
%s`, name, url, model, extra)
}

func fakeEngine(t *testing.T, b fakeengine.Behavior, models ...string) *fakeengine.Fake {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: models, Behavior: b})
	t.Cleanup(f.Close)
	return f
}

// A body over max_body_bytes is refused with a 413 that names the limit,
// on both POST routes, and is not sent to any engine; a body just under
// it is answered.
func TestBodyLimit(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	s := startServe(t, `max_body_bytes: 1024
nodes:
`+engineNode("engine", f.URL, "fake", "")+`providers:
  - name: local
    kind: engine
    model: fake
`, serveOpts{})
	c := client()

	big := choice("fake", strings.Repeat("x", 2000))
	r := do(t, c, "POST", s.URL+"/v1/systemone", "", big)
	if typ, msg := errorMessage(r.Body); r.Status != http.StatusRequestEntityTooLarge || typ != "request_too_large" || !strings.Contains(msg, "1024 bytes") {
		t.Errorf("/v1/systemone with %d bytes: %d %s; want 413 request_too_large naming the limit of 1024 bytes", len(big), r.Status, r.Body)
	}
	r = do(t, c, "POST", s.URL+"/v1/decide", "", fmt.Sprintf(`{"question":%q}`, strings.Repeat("x", 2000)))
	if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), "1024 bytes") {
		t.Errorf("/v1/decide over the limit: %d %s; want 413 naming the limit of 1024 bytes", r.Status, r.Body)
	}
	if n := len(f.Inferences()); n != 0 {
		t.Errorf("the engine got %d inference calls for bodies over the limit", n)
	}

	small := choice("fake", strings.Repeat("x", 1024-len(choice("fake", ""))))
	if len(small) != 1024 {
		t.Fatalf("the body under the limit is %d bytes", len(small))
	}
	if err := answered(do(t, c, "POST", s.URL+"/v1/systemone", "", small)); err != nil {
		t.Errorf("a body of exactly 1024 bytes: %v", err)
	}
}

// dribble opens a raw TCP connection to the server, writes head at once,
// then one more piece every 100 ms until the server closes the
// connection, and reads until it does. It returns what the server sent;
// it fails the test if the server kept the connection open for 30 s,
// which no configured timeout in these tests comes near.
func dribble(t *testing.T, base, head string, piece func(i int) string) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(conn, piece(i)); err != nil {
				return // the server closed the connection
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("the server kept a slow client's connection open for 30s (sent %q)", got)
	case err != nil && !errors.Is(err, syscall.ECONNRESET):
		t.Fatalf("reading from the server: %v", err)
	}
	return got // EOF or a reset: the server closed the connection
}

// A client that sends the request line and then dribbles header lines,
// each well within any read deadline but never finishing, is cut off by
// timeouts.read_header: the connection is closed by the server, long
// before timeouts.read (60 s) could have done it. One that sends its
// headers and then dribbles the body (to /v1/systemone, /v1/decide or /v1/feedback) is
// cut off by timeouts.read, with a 408 if anything is answered at all. Durations are not asserted beyond
// the generous bound that tells a close from a hang.
func TestSlowClients(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	nodes := "nodes:\n" + engineNode("engine", f.URL, "fake", "")

	t.Run("headers", func(t *testing.T) {
		s := startServe(t, "timeouts: {read_header: 500ms, read: 60s}\n"+nodes, serveOpts{})
		got := dribble(t, s.URL, "POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\n",
			func(i int) string { return fmt.Sprintf("X-Slow-%d: y\r\n", i) })
		if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 408") {
			t.Errorf("the server answered a slow header with %q; want a close or a 408", got)
		}
		if r := do(t, client(), "GET", s.URL+"/health", "", ""); r.Status != http.StatusOK {
			t.Errorf("a prompt client after the slow one: %d", r.Status)
		}
	})

	t.Run("body", func(t *testing.T) {
		s := startServe(t, "timeouts: {read_header: 500ms, read: 1s}\n"+nodes, serveOpts{})
		for _, path := range []string{"/v1/systemone", "/v1/decide", "/v1/feedback"} {
			head := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
			got := dribble(t, s.URL, head, func(int) string { return "x" })
			if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 408") {
				t.Errorf("the server answered a slow body on %s with %q; want a close or a 408", path, got)
			}
		}
		if n := len(f.Inferences()); n != 0 {
			t.Errorf("the engine got %d inference calls for a body that never arrived", n)
		}
	})
}

// metric returns the value of the sample line that starts with name in
// the server's /metrics, or "" when there is none.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	r := do(t, client(), "GET", base+"/metrics", "", "")
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// A node with max_inflight 1 and a queue of 1: while one call holds the
// slot (held at a gate in front of the engine, so that it stays in flight
// for as long as the test needs) and a second waits in the queue, a third
// is refused at once with a 503 that says the node is busy and its queue
// is full; the queued one gets a 503 saying no slot came free within the
// queue timeout; the first is answered once the engine answers; and the
// node, busy rather than failing, takes the next request. The queue
// timeout (5 s) is only the window in which the third request must reach
// the node while the second still waits: a bound, not a measurement.
func TestNodeBusy(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	g := newGate(t, f.URL)
	s := startServe(t, "nodes:\n"+engineNode("engine", g.URL, "fake", `    max_inflight: 1
    queue: 1
    queue_timeout: 5s
`), serveOpts{})
	c := client()
	ask := func(state string) <-chan reply {
		ch := make(chan reply, 1)
		go func() {
			r, err := try(c, "POST", s.URL+"/v1/systemone", "", choice("fake", state))
			if err != nil {
				r = reply{Status: -1, Body: []byte(err.Error())}
			}
			ch <- r
		}()
		return ch
	}

	first := ask("first")
	g.await(t, 1)
	second := ask("second")
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, s.URL, `system1_node_queue_depth{node="engine"}`) != "1" {
		if time.Now().After(deadline) {
			t.Fatal("the second request was not queued within 30s")
		}
		time.Sleep(10 * time.Millisecond) // polling the queue depth
	}

	third := <-ask("third")
	typ, msg := errorMessage(third.Body)
	if third.Status != http.StatusServiceUnavailable || typ != "service_unavailable_error" ||
		!strings.Contains(msg, "node engine") || !strings.Contains(msg, "busy") || !strings.Contains(msg, "queue is full") {
		t.Errorf("third request, queue full: %d %s; want a 503 saying node engine is busy and its queue is full", third.Status, third.Body)
	}
	r := <-second
	typ, msg = errorMessage(r.Body)
	if r.Status != http.StatusServiceUnavailable || typ != "service_unavailable_error" ||
		!strings.Contains(msg, "node engine") || !strings.Contains(msg, "busy") || !strings.Contains(msg, "queue_timeout 5s") {
		t.Errorf("second request, queued: %d %s; want a 503 saying node engine is busy: no slot within queue_timeout 5s", r.Status, r.Body)
	}

	g.Open()
	if err := answered(<-first); err != nil {
		t.Errorf("first request, holding the slot: %v", err)
	}
	if err := answered(<-ask("fourth")); err != nil {
		t.Errorf("a request after the node was busy: %v", err)
	}
	if n := len(f.Inferences()); n != 2 {
		t.Errorf("the engine got %d inference calls; want 2 (first and fourth)", n)
	}
}

// Each key has its own token bucket: key A, taken past its burst, gets a
// 429 with Retry-After (and Retry-After-Ms) while key B, from the same
// address, is answered; A, having waited as Retry-After said, is
// answered again. The loop tolerates a slow machine refilling A's bucket
// between requests: it only needs some request to find the bucket empty.
func TestRateLimitPerKey(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	const keyA, keyB = "e2e-key-a", "e2e-key-b"
	s := startServe(t, `keys: [`+keyA+`]
keys_env: E2E_KEYS
rate_limit: {per_second: 1, burst: 2}
nodes:
`+engineNode("engine", f.URL, "fake", ""), serveOpts{Env: []string{"E2E_KEYS=" + keyB}})
	c := client()

	var limited reply
	ok := 0
	for i := 0; i < 50 && limited.Status == 0; i++ {
		switch r := do(t, c, "GET", s.URL+"/v1/models", keyA, ""); r.Status {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited = r
		default:
			t.Fatalf("key A: %d %s", r.Status, r.Body)
		}
	}
	if limited.Status == 0 {
		t.Fatal("50 requests in a row with key A were never limited")
	}
	if ok < 2 {
		t.Errorf("key A was limited after %d requests; its burst is 2", ok)
	}
	secs, err := strconv.Atoi(limited.Header.Get("Retry-After"))
	if err != nil || secs < 1 {
		t.Fatalf("429 Retry-After %q; want whole seconds, at least 1", limited.Header.Get("Retry-After"))
	}
	if ms, err := strconv.Atoi(limited.Header.Get("Retry-After-Ms")); err != nil || ms <= 0 || ms > secs*1000 {
		t.Errorf("429 Retry-After-Ms %q with Retry-After %d", limited.Header.Get("Retry-After-Ms"), secs)
	}
	// The model list, which both wires' clients read, answers in OpenAI's
	// envelope with Jev's detail beside it.
	var both struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Detail struct {
			ErrorType string `json:"error_type"`
		} `json:"detail"`
	}
	if json.Unmarshal(limited.Body, &both) != nil || both.Error.Code != "rate_limit_exceeded" || both.Detail.ErrorType != "rate_limit_error" {
		t.Errorf("429 body %s; want rate_limit_exceeded and a rate_limit_error", limited.Body)
	}

	if r := do(t, c, "GET", s.URL+"/v1/models", keyB, ""); r.Status != http.StatusOK {
		t.Errorf("key B while key A is limited: %d %s", r.Status, r.Body)
	}
	time.Sleep(time.Duration(secs) * time.Second) // the client honours Retry-After
	if r := do(t, c, "GET", s.URL+"/v1/models", keyA, ""); r.Status != http.StatusOK {
		t.Errorf("key A after waiting Retry-After %ds: %d %s", secs, r.Status, r.Body)
	}
}

// secretForms are the ways a key could show up in a log: as is, in
// base64 (padded or not, standard or URL alphabet) and in hex.
func secretForms(key string) []string {
	b := []byte(key)
	return []string{key,
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b))}
}

// No key appears in any log line, /health or /metrics, or any answer:
// not the callers' keys (from keys and from keys_env, sent as a bearer,
// in X-Api-Key, bare in Authorization, in the query string), not a wrong
// key, not the key of an engine node or of a System One upstream node or
// provider (key_env), right or wrong. Every route is asked with each.
// The upstream is another system1 serve with auth on, so the upstream
// key is checked, and its own engine has a key too; both processes log
// at debug level and stop gracefully before their logs are read.
func TestKeysNeverLogged(t *testing.T) {
	key := func(what string) string { return "sk-" + what + "-" + rand.Text() }
	var (
		fileKey      = key("file")     // downstream keys:
		envKey       = key("env")      // downstream keys_env
		envKey2      = key("env2")     // second key in keys_env
		wrongKey     = key("wrong")    // what a caller sends by mistake
		engineKey    = key("engine")   // downstream engine node key_env
		upstreamKey  = key("upstream") // the upstream's caller key: downstream node and provider key_env
		upWrongKey   = key("upwrong")  // a downstream node's wrong key for the upstream
		upEngineKey  = key("upengine") // the upstream's engine node key_env
		allKeys      = []string{fileKey, envKey, envKey2, wrongKey, engineKey, upstreamKey, upWrongKey, upEngineKey}
		callerKeys   = []string{fileKey, envKey, envKey2}
		upEngineFake = fakeEngine(t, fakeengine.Behavior{}, "up-model")
		engineFake   = fakeEngine(t, fakeengine.Behavior{})
	)

	up := startServe(t, `keys_env: E2E_UP_KEYS
nodes:
`+engineNode("engine", upEngineFake.URL, "up-model", "    key_env: E2E_UP_ENGINE_KEY\n"), serveOpts{
		Env: []string{"E2E_UP_KEYS=" + upstreamKey, "E2E_UP_ENGINE_KEY=" + upEngineKey}})
	// Dozens of wrong keys come from this one address on purpose: an
	// allowance big enough that every one gets its 401, not a 429.
	down := startServe(t, fmt.Sprintf(`keys: [%s]
keys_env: E2E_KEYS
rate_limit: {wrong_keys: {burst: 1000}}
nodes:
%s  - name: upstream
    url: %s
    dialect: systemone
    models: [up-model]
    key_env: E2E_UPSTREAM_KEY
  - name: upstream-wrong
    url: %s
    dialect: systemone
    models: [up-wrong]
    key_env: E2E_UPSTREAM_WRONG_KEY
providers:
  - name: upstream-wrong
    kind: systemone
    url: %s
    model: up-model
    key_env: E2E_UPSTREAM_WRONG_KEY
  - name: upstream
    kind: systemone
    url: %s
    model: up-model
    key_env: E2E_UPSTREAM_KEY
  - name: local
    kind: engine
    model: fake
`, fileKey, engineNode("engine", engineFake.URL, "fake", "    key_env: E2E_ENGINE_KEY\n"), up.URL, up.URL, up.URL, up.URL),
		serveOpts{Env: []string{"E2E_KEYS=" + envKey + " , " + envKey2, "E2E_ENGINE_KEY=" + engineKey,
			"E2E_UPSTREAM_KEY=" + upstreamKey, "E2E_UPSTREAM_WRONG_KEY=" + upWrongKey}})

	type route struct {
		method, path, body string
		public             bool // no key needed
		want               int  // with a right key
	}
	routes := []route{
		{"POST", "/v1/systemone", choice("fake", "engine node"), false, 200},
		{"POST", "/v1/systemone", choice("up-model", "upstream node"), false, 200},
		{"POST", "/v1/systemone", choice("up-wrong", "upstream node with a wrong key"), false, 503},
		{"GET", "/v1/models", "", false, 200},
		{"POST", "/v1/decide", `{"question":"Ship it?","options":["yes","no"]}`, false, 200},
		{"GET", "/health", "", true, 200},
		{"GET", "/metrics", "", true, 200},
		{"GET", "/nothing-here", "", true, 404},
	}
	type auth struct {
		name  string
		set   func(*http.Request)
		query string
		ok    bool
	}
	var auths []auth
	for _, k := range callerKeys {
		auths = append(auths,
			auth{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+k) }, "", true},
			auth{"x-api-key", func(r *http.Request) { r.Header.Set("X-Api-Key", k) }, "", true})
	}
	auths = append(auths,
		auth{"none", func(*http.Request) {}, "", false},
		auth{"wrong bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+wrongKey) }, "", false},
		auth{"wrong x-api-key", func(r *http.Request) { r.Header.Set("X-Api-Key", wrongKey) }, "", false},
		auth{"bare authorization", func(r *http.Request) { r.Header.Set("Authorization", fileKey) }, "", false},
		auth{"basic", func(r *http.Request) { r.SetBasicAuth("user", fileKey) }, "", false},
		auth{"query", func(*http.Request) {}, "?api_key=" + fileKey + "&key=" + wrongKey, false},
	)

	c := client()
	var answers strings.Builder // every status line, header and body the callers got
	for _, rt := range routes {
		for _, a := range auths {
			var body io.Reader
			if rt.body != "" {
				body = strings.NewReader(rt.body)
			}
			req, err := http.NewRequest(rt.method, down.URL+rt.path+a.query, body)
			if err != nil {
				t.Fatal(err)
			}
			a.set(req)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s (%s): %v", rt.method, rt.path, a.name, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := rt.want
			if !a.ok && !rt.public {
				want = http.StatusUnauthorized
				if jevRoute(rt.path) && req.Header.Get("Authorization") == "" && req.Header.Get("X-Api-Key") == "" {
					want = http.StatusForbidden // hosted Jev's "Must supply an API key!"
				}
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s (%s): %d %s; want %d", rt.method, rt.path, a.name, resp.StatusCode, b, want)
			}
			fmt.Fprintf(&answers, "%s %v\n%s\n", resp.Status, resp.Header, b)
		}
	}
	// The upstream's own public routes, and its API asked directly.
	for _, p := range []string{"/health", "/metrics"} {
		r := do(t, c, "GET", up.URL+p, "", "")
		fmt.Fprintf(&answers, "%d %v\n%s\n", r.Status, r.Header, r.Body)
	}

	// The keys were in use: each engine saw its own bearer, and the
	// upstream, which checks its key, answered through the right one.
	for _, e := range []struct {
		f   *fakeengine.Fake
		key string
	}{{engineFake, engineKey}, {upEngineFake, upEngineKey}} {
		inf := e.f.Inferences()
		if len(inf) == 0 {
			t.Fatalf("the engine behind %s got no inference call", e.f.URL)
		}
		for _, r := range inf {
			if got := r.Header.Get("Authorization"); got != "Bearer "+e.key {
				t.Errorf("an engine got Authorization %q; want its configured key", got)
			}
		}
	}

	// Stop both gracefully, so that every log line is written.
	for _, s := range []*server{down, up} {
		s.signal(t, syscall.SIGTERM)
		if code := s.wait(t, time.Minute); code != 0 {
			t.Errorf("exit status %d after SIGTERM", code)
		}
	}
	logs := map[string]string{"downstream log": down.log.String(), "upstream log": up.log.String(), "answers": answers.String()}
	if !strings.Contains(logs["downstream log"], "status=401") || !strings.Contains(logs["upstream log"], "status=401") ||
		!strings.Contains(logs["downstream log"], "provider=upstream-wrong outcome=error") {
		t.Error("the logs have no 401 line or no failed provider: the wrong keys were not tried")
	}
	t.Logf("%d requests; downstream log %d lines, upstream log %d lines", len(routes)*len(auths),
		strings.Count(logs["downstream log"], "\n"), strings.Count(logs["upstream log"], "\n"))
	for where, text := range logs {
		for _, k := range allKeys {
			for _, form := range secretForms(k) {
				if strings.Contains(text, form) {
					t.Errorf("the %s contains key %s (as %q)", where, k, form)
				}
			}
		}
	}
}

// selfSigned writes a self-signed ECDSA certificate for 127.0.0.1 and
// localhost, and its key, to dir, and returns their paths and the
// certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "system1 e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})))
	return certFile, keyFile, cert
}

// With tls configured, system1 serves HTTPS on the TLS address beside the
// plain listener. A client that trusts the certificate (made here, in the
// test) is answered on /health and /v1/systemone, keys and all; one that
// does not fails to verify it; the plain listener still answers.
func TestTLSListener(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	certFile, keyFile, cert := selfSigned(t, t.TempDir())
	const key = "e2e-tls-key"
	tlsAddr := testbin.LoopbackAddr(t)
	s := startServe(t, fmt.Sprintf(`keys: [%s]
tls:
  cert: %s
  key: %s
  listen: %s
nodes:
%s`, key, certFile, keyFile, tlsAddr, engineNode("engine", f.URL, "fake", "")), serveOpts{TLS: tlsAddr})
	base := "https://" + tlsAddr

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	trusting := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	r := do(t, trusting, "GET", base+"/health", "", "")
	if r.Status != http.StatusOK {
		t.Errorf("GET /health over TLS: %d %s", r.Status, r.Body)
	}
	if err := answered(do(t, trusting, "POST", base+"/v1/systemone", key, choice("fake", "over TLS"))); err != nil {
		t.Errorf("POST /v1/systemone over TLS: %v", err)
	}
	if r := do(t, trusting, "POST", base+"/v1/systemone", "", choice("fake", "over TLS")); r.Status != http.StatusForbidden {
		t.Errorf("POST /v1/systemone over TLS without a key: %d; want 403", r.Status)
	}

	stranger := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	_, err := try(stranger, "GET", base+"/health", "", "")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("a client without the certificate: %v; want an unknown authority error", err)
	}

	if err := answered(do(t, client(), "POST", s.URL+"/v1/systemone", key, choice("fake", "in plain"))); err != nil {
		t.Errorf("the plain listener beside TLS: %v", err)
	}
}

// An upstream that echoes the key it was sent back in its error (some
// gateways do, in "invalid API key: ..." messages) does not get that key
// into system1's log, its answers, /health or /metrics: engine and System
// One nodes (through /v1/systemone and the health probe) and a System One
// provider (through /v1/decide) alike.
func TestEchoedKeyRedacted(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := "invalid API key: " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"authentication_error"},"detail":{"error_type":"authentication_error","message":%q}}`, msg, msg)
	}))
	t.Cleanup(echo.Close)
	engineKey, upstreamKey := "sk-echo-engine-"+rand.Text(), "sk-echo-upstream-"+rand.Text()
	s := startServe(t, fmt.Sprintf(`nodes:
  - name: engine
    url: %s
    dialect: openai
    models: [echo-engine]
    key_env: E2E_ENGINE_KEY
  - name: upstream
    url: %s
    dialect: systemone
    models: [echo-upstream]
    key_env: E2E_UPSTREAM_KEY
providers:
  - name: upstream
    kind: systemone
    url: %s
    model: echo-upstream
    key_env: E2E_UPSTREAM_KEY
`, echo.URL, echo.URL, echo.URL), serveOpts{Env: []string{"E2E_ENGINE_KEY=" + engineKey, "E2E_UPSTREAM_KEY=" + upstreamKey}})
	c := client()
	var answers strings.Builder
	for _, model := range []string{"echo-engine", "echo-upstream"} {
		r := do(t, c, "POST", s.URL+"/v1/systemone", "", choice(model, "echo"))
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: %d %s; want 503", model, r.Status, r.Body)
		}
		fmt.Fprintf(&answers, "%d %v\n%s\n", r.Status, r.Header, r.Body)
	}
	r := do(t, c, "POST", s.URL+"/v1/decide", "", `{"question":"Ship it?"}`)
	if r.Status != http.StatusBadGateway {
		t.Errorf("/v1/decide: %d %s; want 502", r.Status, r.Body)
	}
	fmt.Fprintf(&answers, "%d %v\n%s\n", r.Status, r.Header, r.Body)
	for _, p := range []string{"/health", "/metrics"} {
		r := do(t, c, "GET", s.URL+p, "", "")
		fmt.Fprintf(&answers, "%d %v\n%s\n", r.Status, r.Header, r.Body)
	}
	s.signal(t, syscall.SIGTERM)
	if code := s.wait(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	all := s.log.String() + answers.String()
	if !strings.Contains(all, "invalid API key: [redacted]") {
		t.Errorf("the echoing upstream's message is nowhere with the key redacted: the test did not reach it")
	}
	for _, k := range []string{engineKey, upstreamKey} {
		for _, form := range secretForms(k) {
			if strings.Contains(all, form) {
				t.Errorf("key %s (as %q) echoed by an upstream reached the log or an answer:\n%s", k, form, all)
			}
		}
	}
}
