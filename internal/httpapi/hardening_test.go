package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
)

const noulQ = `{"model":"fake","state":"s","questions":{"q":{"type":"noul"}}}`

// from returns a client of s whose connections come from the loopback
// address ip (127.0.0.2, ...), so that a test can be two callers.
func (s *system1) from(t testing.TB, ip string) *system1 {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &system1{URL: s.URL, client: &http.Client{Transport: checker{t: t, base: tr}}}
}

// Tokens of Unicode spaces, an empty or blank key, and keys behind a
// lower-case scheme: HTTP trims only spaces and tabs, so a token of
// U+00A0 is a token, not an empty one, and matches no key; "bearer" is
// the Bearer scheme (RFC 9110: schemes are case-insensitive).
func TestAuthTokensAsHTTPReadsThem(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	// "" is what a blank key from a configuration came to before keys
	// were checked (TrimSpace of the token made U+00A0 match it); the
	// configuration refuses it now (cmd/system1's TestServeRefusesBlankKeys), and the
	// server still refuses every empty token.
	s := serve(t, setup{nodes: []node{n}, keys: []string{"real", ""}})
	for _, h := range []string{
		"Authorization: Bearer \u00a0",
		"Authorization: Bearer \u2003",
		"Authorization: Bearer \u00a0\u2003\u3000",
		"X-Api-Key: \u00a0",
		"X-Api-Key: \u2003",
		"Authorization: Bearer ",
		"Authorization: Bearer",
		"X-Api-Key: ",
		"Authorization: Bearer \u00a0real",
		"Authorization: Bearer real\u00a0",
		"Authorization: Basic real",
		"Authorization: Bearerreal",
	} {
		r := s.ask(t, noulQ, h)
		if r.status != http.StatusUnauthorized {
			t.Errorf("%q: got %s, want 401", h, r)
		}
		s = s.from(t, "127.0.0."+strconv.Itoa(10+len(h))) // stay under the guess allowance
	}
	for _, h := range []string{
		"Authorization: Bearer real",
		"Authorization: bearer real",
		"Authorization: BEARER real",
		"Authorization: Bearer \treal\t ",
		"Authorization: Bearer  real",
		"X-Api-Key: \t real \t",
	} {
		if r := s.ask(t, noulQ, h); r.status != http.StatusOK {
			t.Errorf("%q: got %s, want 200", h, r)
		}
	}
}

// Wrong keys from one address are throttled: after the burst, 429s with
// Retry-After, without the key being looked at (the right key from that
// address is throttled too, so a guesser cannot tell). Another address
// with the right key is served, and the throttle reaches no engine.
func TestWrongKeyGuessesThrottled(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, keys: []string{"real"}})
	stranger := s.from(t, "127.0.0.2")
	start := time.Now()
	var unauthorized, limited int
	var retry string
	for i := range 30 {
		r := stranger.ask(t, noulQ, "Authorization: Bearer guess-"+strconv.Itoa(i))
		switch r.status {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			wantError(t, r, http.StatusTooManyRequests, "rate_limit_error", "wrong API keys")
			limited++
			retry = r.header.Get("Retry-After")
		default:
			t.Fatalf("guess %d: %s", i, r)
		}
	}
	// The allowance refills by one every 6 s: a slow machine may have
	// earned a guess or two more while the loop ran.
	allowed := 10 + int(time.Since(start)/(6*time.Second)) + 1
	if limited == 0 || unauthorized > allowed {
		t.Fatalf("30 wrong keys: %d 401s and %d 429s; want at most %d 401s", unauthorized, limited, allowed)
	}
	if secs, err := strconv.Atoi(retry); err != nil || secs < 1 {
		t.Errorf("Retry-After %q", retry)
	}
	if r := stranger.ask(t, noulQ, "Authorization: Bearer real"); r.status != http.StatusTooManyRequests {
		t.Errorf("the right key from the throttled address: %s, want 429 (the key is not looked at)", r)
	}
	if r := stranger.do(t, http.MethodGet, "/health", "", "Authorization: Bearer real"); r.status != http.StatusOK || strings.Contains(string(r.body), "nodes") {
		t.Errorf("health with the right key from the throttled address: %s, want the status alone", r)
	}
	for _, h := range []string{"Authorization: Bearer real", "X-Api-Key: real"} {
		if r := s.from(t, "127.0.0.3").ask(t, noulQ, h); r.status != http.StatusOK {
			t.Errorf("the right key from another address after a throttled stranger: %s", r)
		}
	}
	if got := len(n.fake.Inferences()); got != 2 {
		t.Errorf("%d engine calls, want 2", got)
	}
}

// A right key does not use the allowance up: many requests with it from
// one address are all served.
func TestRightKeysAreNotThrottled(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, keys: []string{"real"}})
	for i := range 25 {
		if r := s.do(t, http.MethodGet, "/v1/models", "", "Authorization: Bearer real"); r.status != http.StatusOK {
			t.Fatalf("request %d: %s", i, r)
		}
	}
}

// With auth on, GET /health without a key (or with a wrong one) shows the
// status alone: no node names, models, URLs or cooldown reasons. With a
// key it shows the nodes, but no URL, user name or address, and neither
// does a 503 that a node's failure causes.
func TestTopologyNeedsAKey(t *testing.T) {
	dead := startNode(t, "gpu-secret-name", fakeengine.OpenAI, fakeengine.Behavior{}, func(c *config.Node) {
		c.URL = "http://admin:hunter2@127.0.0.1:1/"
	})
	s := serve(t, setup{nodes: []node{dead}, keys: []string{"real"}})
	leaks := []string{"admin", "hunter2", "127.0.0.1:1", "http://"}

	for _, h := range [][]string{nil, {"Authorization: Bearer wrong"}} {
		r := s.do(t, http.MethodGet, "/health", "", h...)
		var body map[string]any
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusOK {
			t.Fatalf("health %v: %s", h, r)
		}
		var keys []string
		for k := range body {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"auth", "status"}) || body["status"] != "ok" {
			t.Errorf("health %v shows %s, want the status and auth alone", h, r.body)
		}
	}

	r := s.do(t, http.MethodGet, "/health", "", "Authorization: Bearer real")
	if !strings.Contains(string(r.body), "gpu-secret-name") {
		t.Errorf("health with a key does not show the nodes: %s", r)
	}
	r503 := s.ask(t, noulQ, "Authorization: Bearer real")
	if r503.status != http.StatusServiceUnavailable {
		t.Fatalf("a request to a dead node: %s", r503)
	}
	for _, body := range [][]byte{r.body, r503.body} {
		for _, l := range leaks {
			if strings.Contains(string(body), l) {
				t.Errorf("%q is in a body a caller reads: %s", l, body)
			}
		}
	}
}

// validHead reports whether every header of a reply is a valid field
// value (visible ASCII, space and tab, no space at either end) and the
// whole head is small.
func validHead(t *testing.T, h http.Header) {
	t.Helper()
	size := 0
	for k, vs := range h {
		for _, v := range vs {
			size += len(k) + len(v) + 4
			for i := 0; i < len(v); i++ {
				if c := v[i]; (c < 0x20 && c != '\t') || c >= 0x7f {
					t.Errorf("header %s holds byte %#x: %q", k, c, v)
					break
				}
			}
			if strings.Trim(v, " \t") != v {
				t.Errorf("header %s has white space at an end: %q", k, v)
			}
		}
	}
	if size > 1024 {
		t.Errorf("the head is %d bytes: %v", size, h)
	}
}

// Option names and question ids reach X-System1-Warnings escaped and cut:
// control characters (U+0001, DEL, NUL, ESC) give a valid header, and 40
// options of 1 KB names a small one; the full names go to the log line.
func TestWarningsHeaderIsValidAndSmall(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		options  []string
	}{
		{"control characters", "q\x01\x1b", []string{"a\x01", "b\x7f", "c\x00", "d\x1b[31m", "e\r\nX-Injected: 1"}},
		{"40 options of 1 KB", strings.Repeat("i", 1024), func() []string {
			var o []string
			for i := range 40 {
				o = append(o, strconv.Itoa(i)+strings.Repeat("n", 1024))
			}
			return o
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The engine ranks only the first option, so every other is
			// missing and named in the warning.
			n := startNode(t, "n", fakeengine.Ollama, fakeengine.Behavior{Logprobs: fakeengine.Probs(1)})
			s := serve(t, setup{nodes: []node{n}})
			crit := map[string]any{}
			for _, o := range tc.options {
				crit[o] = nil
			}
			body, _ := json.Marshal(map[string]any{"model": "fake", "state": "s",
				"questions": map[string]any{tc.id: map[string]any{"type": "choice", "criteria": crit}}})
			r := s.ask(t, string(body))
			if r.status != http.StatusOK {
				t.Fatalf("%s", r)
			}
			w := r.header.Get("X-System1-Warnings")
			if w == "" || !strings.Contains(w, "not in the engine's top log-probabilities") {
				t.Errorf("warnings %q", w)
			}
			if r.header.Get("X-Injected") != "" {
				t.Error("a header was injected")
			}
			t.Logf("a body of %d bytes: X-System1-Warnings of %d bytes", len(body), len(w))
			validHead(t, r.header)
			nodeFetch(t, s.URL+"/v1/systemone", string(body))
		})
	}
}

// nodeFetch posts body to url with Node's fetch (undici), what the JS SDK,
// JDE and promptfoo use, when Node is installed: it refuses a head with
// an invalid header value (HPE_INVALID_HEADER_TOKEN) or over 16 KB
// (UND_ERR_HEADERS_OVERFLOW).
func nodeFetch(t *testing.T, url, body string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Log("node is not installed: the check with Node's fetch is skipped")
		return
	}
	const script = `const r = await fetch(process.argv[1], {method: "POST", headers: {"content-type": "application/json"}, body: process.argv[2]});
await r.text();
if (r.status !== 200) { console.error("status", r.status); process.exit(1); }`
	out, err := exec.CommandContext(t.Context(), node, "--input-type=module", "-e", script, url, body).CombinedOutput()
	if err != nil {
		t.Errorf("Node's fetch: %v\n%s", err, out)
	}
}

// serveBoth runs system1 serve's HTTP face with POST /v1/decide too: the
// real gateway over the same router, its chain one engine provider.
func serveBoth(t *testing.T, maxBody int64, nodes ...node) *system1 {
	t.Helper()
	s, _ := serveGateway(t, maxBody, nodes...)
	return s
}

// serveGateway is serveBoth, returning the gateway too, whose Health is
// system1_health.
func serveGateway(t *testing.T, maxBody int64, nodes ...node) (*system1, *gateway.Gateway) {
	t.Helper()
	var fns []*fleet.Node
	for _, n := range nodes {
		fn, err := fleet.NewNode(n.cfg, func(string) string { return "" }, nil)
		if err != nil {
			t.Fatal(err)
		}
		fns = append(fns, fn)
	}
	router := fleet.New(fns, fleet.Options{Policy: testPolicy})
	router.Refresh(t.Context())
	cfg, err := config.Parse([]byte("providers:\n  - {name: local, kind: engine, model: fake}\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc := answer.New(answer.Options{Router: router})
	g := gateway.New(gateway.Options{Config: cfg, Answer: svc})
	api := httpapi.New(httpapi.Options{
		Answer:       svc,
		Rounding:     2,
		MaxBodyBytes: maxBody,
		Decide:       g,
	})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &system1{URL: srv.URL, client: &http.Client{Transport: checker{t: t, base: http.DefaultTransport}}}, g
}

func gzipped(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

const decideQ = `{"question":"Which?","options":["a","b"]}`

// A gzip body is read as what it decompresses to, on both routes; its
// limit is max_body_bytes of decompressed bytes, so that a zip bomb is a
// 413 naming max_body_bytes and costs no more memory than the limit; a
// gzip body that is not gzip is a 400 naming gzip; any other encoding is
// a 415 naming it.
func TestCompressedBodies(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serveBoth(t, 64<<10, n)
	for _, route := range []struct{ path, body string }{{"/v1/systemone", noulQ}, {"/v1/decide", decideQ}} {
		t.Run(route.path, func(t *testing.T) {
			for _, enc := range []string{"gzip", "GZIP", "x-gzip"} {
				if r := s.do(t, http.MethodPost, route.path, gzipped(t, route.body), "Content-Encoding: "+enc); r.status != http.StatusOK {
					t.Errorf("%s: %s", enc, r)
				}
			}
			for _, enc := range []string{"identity", ""} {
				if r := s.do(t, http.MethodPost, route.path, route.body, "Content-Encoding: "+enc); r.status != http.StatusOK {
					t.Errorf("%q: %s", enc, r)
				}
			}

			// 1 MiB of zeros, gzipped, repeated: a valid gzip body of a
			// few KB that decompresses to 256 MiB.
			member := gzipped(t, string(make([]byte, 1<<20)))
			bomb := strings.Repeat(member, 256)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r := s.do(t, http.MethodPost, route.path, bomb, "Content-Encoding: gzip")
			runtime.ReadMemStats(&after)
			if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "max_body_bytes") || !strings.Contains(string(r.body), "65536") {
				t.Errorf("a zip bomb of %d bytes: %s", len(bomb), r)
			}
			t.Logf("a zip bomb of %d bytes (256 MiB decompressed): %d KiB allocated while it was refused", len(bomb), (after.TotalAlloc-before.TotalAlloc)>>10)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("a zip bomb cost %d MiB of allocations", alloc>>20)
			}

			r = s.do(t, http.MethodPost, route.path, route.body, "Content-Encoding: gzip")
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "gzip") {
				t.Errorf("a plain body sent as gzip: %s", r)
			}
			for _, enc := range []string{"deflate", "br", "zstd", "compress", "gzip, gzip", "bogus\u00e9"} {
				r := s.do(t, http.MethodPost, route.path, route.body, "Content-Encoding: "+enc)
				if r.status != http.StatusUnsupportedMediaType || !strings.Contains(string(r.body), strings.Split(enc, ",")[0]) && enc != "bogus\u00e9" {
					t.Errorf("Content-Encoding %q: %s", enc, r)
				}
			}
			if len(n.fake.Inferences()) == 0 {
				t.Error("no request reached the engine")
			}
		})
	}
}

// detail is the 422 body's detail list.
func detail(t *testing.T, r reply) []struct {
	Loc  []string `json:"loc"`
	Msg  string   `json:"msg"`
	Type string   `json:"type"`
} {
	t.Helper()
	var body struct {
		Detail []struct {
			Loc  []string `json:"loc"`
			Msg  string   `json:"msg"`
			Type string   `json:"type"`
		} `json:"detail"`
	}
	if r.status != http.StatusUnprocessableEntity || json.Unmarshal(r.body, &body) != nil || len(body.Detail) == 0 {
		t.Fatalf("want a 422 with detail, got %s", r)
	}
	return body.Detail
}

// Text that is not valid UTF-8 (raw bytes or an unpaired surrogate
// escape) is a 422 naming where it is, not a U+FFFD in an id; and an id
// of any valid text comes back as sent.
func TestInvalidUTF8(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serveBoth(t, 0, n)
	for _, tc := range []struct {
		name, body string
		loc        []string
	}{
		{"an id", "{\"model\":\"fake\",\"state\":\"s\",\"questions\":{\"q\xff\":{\"type\":\"noul\"}}}", []string{"body", "questions"}},
		{"an id with a lone surrogate", `{"model":"fake","state":"s","questions":{"q\ud800":{"type":"noul"}}}`, []string{"body", "questions"}},
		{"the state", "{\"model\":\"fake\",\"state\":\"caf\xe9\",\"questions\":{\"q\":{\"type\":\"noul\"}}}", []string{"body", "state"}},
		{"deep in the state", "{\"model\":\"fake\",\"state\":{\"t\":[\"\xc3\"]},\"questions\":{\"q\":{\"type\":\"noul\"}}}", []string{"body", "state", "t", "0"}},
		{"an option", "{\"model\":\"fake\",\"state\":\"s\",\"questions\":{\"q\":{\"type\":\"choice\",\"criteria\":{\"a\":null,\"b\x80\":null}}}}", []string{"body", "questions", "q", "criteria"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := detail(t, s.ask(t, tc.body))
			if !slices.Equal(d[0].Loc, tc.loc) || d[0].Type != "string_unicode" || !strings.Contains(d[0].Msg, "UTF-8") {
				t.Errorf("detail %+v, want loc %q", d, tc.loc)
			}
		})
	}
	for _, body := range []string{"{\"question\":\"Which?\",\"options\":[\"a\",\"b\xff\"]}", `{"question":"Which?","options":["a","b\udc00"]}`} {
		r := s.do(t, http.MethodPost, "/v1/decide", body)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "options[1] is not valid UTF-8") {
			t.Errorf("decide %q: %s", body, r)
		}
	}

	for _, id := range []string{"q\u00e9", "\U0001F600", "a<b>&c", "tab\there", "\u2028"} {
		idJSON, _ := json.Marshal(id)
		for _, q := range []string{string(idJSON), asciiJSON(id)} {
			r := s.ask(t, `{"model":"fake","state":"s","questions":{`+q+`:{"type":"noul"}}}`)
			var body struct{ Answers map[string]json.RawMessage }
			if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusOK || body.Answers[id] == nil {
				t.Errorf("id %s: %s", q, r)
			}
		}
	}
}

// A key twice is named, with where it is: not "body must be a JSON
// object" or "a question must be an object".
func TestDuplicateKeys(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serveBoth(t, 0, n)
	for _, tc := range []struct {
		body string
		loc  []string
	}{
		{`{"model":"fake","model":"fake","state":"s","questions":{"q":{"type":"noul"}}}`, []string{"body", "model"}},
		{`{"model":"fake","state":"s","questions":{"q1":{"type":"noul","type":"noul"}}}`, []string{"body", "questions", "q1", "type"}},
		{`{"model":"fake","state":"s","questions":{"q1":{"type":"noul"},"q1":{"type":"noul"}}}`, []string{"body", "questions", "q1"}},
		{`{"model":"fake","state":"s","questions":{"q":{"type":"choice","criteria":{"a":null,"b":null,"a":"x"}}}}`, []string{"body", "questions", "q", "criteria", "a"}},
		{`{"model":"fake","state":"s","questions":{"q":{"type":"noul","criteria":{"true":"a","true":"b"}}}}`, []string{"body", "questions", "q", "criteria", "true"}},
		{`{"model":"fake","state":"s","questions":{"q":{"type":"score","criteria":{"low":"a","low":"b"}}}}`, []string{"body", "questions", "q", "criteria", "low"}},
	} {
		d := detail(t, s.ask(t, tc.body))
		if len(d) != 1 || !slices.Equal(d[0].Loc, tc.loc) || d[0].Type != "duplicate_key" || !strings.Contains(d[0].Msg, "twice") {
			t.Errorf("%s: detail %+v, want one at %q", tc.body, d, tc.loc)
		}
	}
	// An empty question id is refused as hosted Jev refuses it, naming it.
	d := detail(t, s.ask(t, `{"model":"fake","state":"s","questions":{"":{"type":"noul"},"q":{"type":"noul"}}}`))
	if len(d) != 1 || !slices.Equal(d[0].Loc, []string{"body", "questions", ""}) || d[0].Msg != "Question key cannot be empty." {
		t.Errorf("an empty question id: detail %+v", d)
	}
	r := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Which?","options":["a","b"],"options":["c","d"]}`)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `the request has the key \"options\" twice`) {
		t.Errorf("decide: %s", r)
	}
}

// POST /v1/decide names no node address either: the attempts' details,
// the error and the rationale are redacted.
func TestDecideNamesNoAddress(t *testing.T) {
	dead := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{}, func(c *config.Node) {
		c.URL = "http://admin:hunter2@127.0.0.1:1/"
	})
	s := serveBoth(t, 0, dead)
	r := s.do(t, http.MethodPost, "/v1/decide", decideQ)
	if r.status < 500 {
		t.Fatalf("a dead node: %s", r)
	}
	for _, l := range []string{"admin", "hunter2", "127.0.0.1:1", "http://"} {
		if strings.Contains(string(r.body), l) {
			t.Errorf("%q is in the body: %s", l, r.body)
		}
	}
}

// asciiJSON writes s as a JSON string of ASCII alone: every other
// character as \u escapes (a surrogate pair beyond U+FFFF).
func asciiJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r < 0x20 || r == '"' || r == '\\' || r > 0x7e:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// A key given twice inside JSON data (a state, instructions, a context)
// is refused by one rule on every wire, as it is refused in the wire's
// own fields: JSON readers disagree on which one wins. Each route says so
// in its own envelope, naming the place; nothing reaches the engine.
func TestDuplicateKeyInDataOnEveryWire(t *testing.T) {
	n := startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}})
	const dup = `{"a":1,"b":{"c":2,"c":3}}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		loc              string
	}{
		{"a state", "/v1/systemone", `{"model":"fake","state":` + dup + `,"questions":{"q":{"type":"noul"}}}`, 422, `["body","state","b","c"]`},
		{"instructions", "/v1/systemone", `{"model":"fake","state":"s","questions":{"q":{"type":"noul","instructions":` + dup + `}}}`, 422,
			`["body","questions","q","instructions","b","c"]`},
		{"a criterion", "/v1/systemone", `{"model":"fake","state":"s","questions":{"q":{"type":"choice","criteria":{"x":` + dup + `,"y":null}}}}`, 422,
			`["body","questions","q","criteria","x","b","c"]`},
		{"a batch's state", "/v1/systemone/batch", `{"model":"fake","states":["s",` + dup + `],"questions":{"q":{"type":"noul"}}}`, 422,
			`["body","states","1","b","c"]`},
		{"input_json", "/v1/decisions", `{"model":"fake","input":[{"role":"user","content":[{"type":"input_json","data":` + dup + `}]}],"questions":[{"type":"predicate","instructions":"?"}]}`, 400,
			`input[0].content[0].data`},
	} {
		r := s.do(t, http.MethodPost, tc.path, tc.body)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.loc) || !strings.Contains(string(r.body), "twice") {
			t.Errorf("%s: %s, want %d naming %s", tc.name, r, tc.status, tc.loc)
		}
	}
	if got := len(n.fake.Inferences()); got != 0 {
		t.Errorf("%d engine calls for requests with a key twice", got)
	}

	d := decideServer(t, fakeengine.Behavior{}, 0, 0)
	for _, tc := range []struct{ name, path, body, has string }{
		{"a decide context", "/v1/decide", `{"question":"Refund?","context":` + dup + `}`, `context.b.c`},
		{"a decide batch's context", "/v1/decide/batch", `{"question":"Refund?","contexts":[{"t":1},` + dup + `]}`, `contexts[1]: context.b.c`},
	} {
		r := d.do(t, http.MethodPost, tc.path, tc.body)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), tc.has) || !strings.Contains(string(r.body), "twice") {
			t.Errorf("%s: %s, want 422 naming %s", tc.name, r, tc.has)
		}
	}
}

// A health check that carries another scheme's credentials (a proxy's
// Basic, for its own upstream) offers no key: /health answers it as one
// without a key and does not count it as a wrong key, so the proxy's
// address keeps its allowance for the API.
func TestHealthWithBasicCredentialsIsNoWrongKey(t *testing.T) {
	s := serve(t, setup{keys: []string{"real"}})
	for i := range 3 * httpapi.DefaultGuessBurst {
		r := s.do(t, http.MethodGet, "/health", "", "Authorization: Basic cHJvYmU6cHJvYmU=")
		if r.status != http.StatusOK || strings.Contains(string(r.body), "nodes") {
			t.Fatalf("health check %d: %s", i, r)
		}
	}
	if r := s.do(t, http.MethodGet, "/v1/models", "", "Authorization: Bearer real"); r.status != http.StatusOK {
		t.Errorf("the right key after %d health checks with Basic credentials: %s", 3*httpapi.DefaultGuessBurst, r)
	}
}
