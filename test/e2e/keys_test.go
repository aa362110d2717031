package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"system1/internal/fakeengine"
)

// tenants are the keys of TestScopesThroughTheBinary: one plain string,
// which holds every scope, and one named key per scope.
var tenants = []struct{ name, secret, scope string }{
	{"keys[0]", "sk-e2e-plain-every-scope", ""},
	{"decider", "sk-e2e-decide-only", "decide"},
	{"feeder", "sk-e2e-feedback-only", "feedback"},
	{"reader", "sk-e2e-read-only", "read"},
	{"operator", "sk-e2e-admin-only", "admin"},
}

// Every route of the binary, as its OpenAPI document lists them, asked
// with each key: a key holding the route's scope (or any key, for the
// model list; none at all for the open routes) gets past auth, any other
// gets a 403 in the route's own error envelope naming the scope and the
// key's name. The plain string key is refused nowhere. Metrics count the
// requests by key name, never showing a key, and the log names the key
// the same way.
func TestScopesThroughTheBinary(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	dir := t.TempDir()
	var keys strings.Builder
	for _, k := range tenants {
		if k.scope == "" {
			fmt.Fprintf(&keys, "  - %s\n", k.secret)
			continue
		}
		fmt.Fprintf(&keys, "  - {name: %s, key: %s, scopes: [%s]}\n", k.name, k.secret, k.scope)
	}
	// Each route is asked once without a key: more wrong keys than the
	// default allowance of one address.
	s := startServe(t, fmt.Sprintf(`rate_limit: {wrong_keys: {per_minute: 60, burst: 100}}
keys:
%snodes:
%sgateway:
  chain:
    - {name: local, model: fake}
decision_log:
  path: %s
`, keys.String(), engineNode("engine", f.URL, "fake", ""), filepath.Join(dir, "decisions.db")), serveOpts{})
	c := client()

	// What each route needs, and how its wire writes a 403: the error's
	// field that tells it apart, and its value.
	type envelope struct{ field, value string }
	var (
		systemOne = envelope{"type", "permission_error"}
		decisions = envelope{"code", "missing_scope"}
		decide    = envelope{"code", "forbidden"}
	)
	routes := []struct {
		method, path, needs string
		wire                envelope
	}{
		{"POST", "/v1/systemone", "decide", systemOne},
		{"POST", "/v1/systemone/batch", "decide", systemOne},
		{"POST", "/v1/decisions", "decide", decisions},
		{"POST", "/v1/decide", "decide", decide},
		{"POST", "/v1/decide/batch", "decide", decide},
		{"POST", "/v1/feedback", "feedback", systemOne},
		{"GET", "/v1/calibration", "read", systemOne},
		{"GET", "/v1/shadow", "read", systemOne},
		{"GET", "/v1/usage", "read", systemOne},
		{"GET", "/v1/models", "any key", systemOne},
		{"GET", "/v1/models/{id}", "any key", systemOne},
		{"GET", "/health", "open", systemOne},
		{"GET", "/livez", "open", systemOne},
		{"GET", "/readyz", "open", systemOne},
		{"GET", "/metrics", "open", systemOne},
		{"GET", "/", "open", systemOne},
		{"GET", "/docs", "open", systemOne},
		{"GET", "/openapi.json", "open", systemOne},
	}

	// The table is every route the binary documents.
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if r := do(t, c, "GET", s.URL+"/openapi.json", "", ""); r.Status != http.StatusOK || json.Unmarshal(r.Body, &doc) != nil {
		t.Fatalf("GET /openapi.json: %d", r.Status)
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !slices.ContainsFunc(routes, func(r struct {
				method, path, needs string
				wire                envelope
			}) bool {
				return r.path == path && strings.EqualFold(r.method, method)
			}) {
				t.Errorf("%s %s is documented but not in this test's table of scopes", strings.ToUpper(method), path)
			}
		}
	}

	for _, rt := range routes {
		body := ""
		if rt.method == "POST" {
			body = "{}"
		}
		if rt.needs != "open" {
			want := http.StatusUnauthorized
			if jevRoute(rt.path) {
				want = http.StatusForbidden // hosted Jev's "Must supply an API key!"
			}
			if r := do(t, c, rt.method, s.URL+rt.path, "", body); r.Status != want {
				t.Errorf("%s %s without a key: %d, want %d", rt.method, rt.path, r.Status, want)
			}
		}
		for _, k := range tenants {
			r := do(t, c, rt.method, s.URL+rt.path, k.secret, body)
			allowed := rt.needs == "open" || rt.needs == "any key" || k.scope == "" || k.scope == rt.needs
			if allowed {
				if r.Status == http.StatusForbidden || r.Status == http.StatusUnauthorized {
					t.Errorf("%s %s with %s (%s): %d %s", rt.method, rt.path, k.name, k.scope, r.Status, r.Body)
				}
				continue
			}
			if r.Status != http.StatusForbidden {
				t.Errorf("%s %s with %s (%s): %d, want 403", rt.method, rt.path, k.name, k.scope, r.Status)
				continue
			}
			var e struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(r.Body, &e); err != nil || e.Error[rt.wire.field] != rt.wire.value {
				t.Errorf("%s %s with %s: 403 %s; want error.%s %s", rt.method, rt.path, k.name, r.Body, rt.wire.field, rt.wire.value)
			}
			msg, _ := e.Error["message"].(string)
			if !strings.Contains(msg, fmt.Sprintf("%q", rt.needs)) || !strings.Contains(msg, k.name) || strings.Contains(msg, k.secret) {
				t.Errorf("%s %s with %s: message %q; want the scope %q and the key's name, never the key", rt.method, rt.path, k.name, msg, rt.needs)
			}
		}
	}

	m := string(do(t, c, "GET", s.URL+"/metrics", "", "").Body)
	log := s.log.String()
	for _, k := range tenants {
		if strings.Contains(m, k.secret) || strings.Contains(log, k.secret) {
			t.Errorf("the key of %s shows in the metrics or the log", k.name)
		}
		if !strings.Contains(m, fmt.Sprintf(`system1_requests_total{code="200",key=%q,route="GET /v1/models"} 1`, k.name)) {
			t.Errorf("metrics do not count %s's model list by its name", k.name)
		}
	}
	if want := `system1_requests_total{code="403",key="decider",route="GET /v1/calibration"} 1`; !strings.Contains(m, want) {
		t.Errorf("metrics lack %s", want)
	}
	// The key label takes the configured names and "" only.
	for _, l := range regexp.MustCompile(`system1_requests_total\{[^}]*key="([^"]*)"`).FindAllStringSubmatch(m, -1) {
		if l[1] != "" && !slices.ContainsFunc(tenants, func(k struct{ name, secret, scope string }) bool { return k.name == l[1] }) {
			t.Errorf("metrics label a request with the key %q, not a configured name", l[1])
		}
	}
	if !regexp.MustCompile(`msg=request .*path=/v1/shadow status=403 .*key=feeder`).MatchString(log) {
		t.Errorf("no request line names the key feeder on its 403 from /v1/shadow")
	}
}

// A key's own rate_limit replaces the default for it alone: the slow
// key is limited after its burst of one while a plain key, under the
// default (unlimited), is not.
func TestRateLimitOfOneKey(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	s := startServe(t, `keys:
  - sk-e2e-plain
  - {name: slow, key: sk-e2e-slow, scopes: [decide], rate_limit: {per_second: 0.001, burst: 1}}
nodes:
`+engineNode("engine", f.URL, "fake", ""), serveOpts{})
	c := client()
	if r := do(t, c, "GET", s.URL+"/v1/models", "sk-e2e-slow", ""); r.Status != http.StatusOK {
		t.Fatalf("the slow key's first request: %d %s", r.Status, r.Body)
	}
	r := do(t, c, "GET", s.URL+"/v1/models", "sk-e2e-slow", "")
	// /v1/models answers in OpenAI's envelope, with Jev's detail beside it.
	var jev struct {
		Detail struct {
			Type string `json:"error_type"`
		} `json:"detail"`
	}
	if json.Unmarshal(r.Body, &jev); r.Status != http.StatusTooManyRequests || jev.Detail.Type != "rate_limit_error" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("the slow key's second request: %d %s; want a 429 with Retry-After", r.Status, r.Body)
	}
	for i := range 5 {
		if r := do(t, c, "GET", s.URL+"/v1/models", "sk-e2e-plain", ""); r.Status != http.StatusOK {
			t.Fatalf("the plain key's request %d: %d %s", i, r.Status, r.Body)
		}
	}
}

// jevRoute reports whether path is one of the routes hosted Jev answers
// (and their batch), where a request without a key is a 403.
func jevRoute(path string) bool {
	return path == "/v1/systemone" || path == "/v1/systemone/batch"
}
