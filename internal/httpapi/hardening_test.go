package httpapi_test

import (
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/fakeengine"
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
	// configuration refuses it now (TestServeRefusesBlankKeys), and the
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

// system1 serve refuses a configuration with an empty or blank key, from
// the file or from the keys variable, naming keys.
func TestServeRefusesBlankKeys(t *testing.T) {
	for _, c := range []config.Config{
		{Keys: []string{"real", ""}},
		{Keys: []string{"   "}},
		{Keys: []string{"\u00a0"}},
		{KeysEnv: "K"},
	} {
		_, err := c.APIKeys(func(string) string { return "real,,other" })
		if err == nil || !strings.Contains(err.Error(), "keys") {
			t.Errorf("%+v: %v", c, err)
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
