package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/testbin"
	"system1/internal/web"
)

// scopedServer is a server with every route, the gateway's and the
// page's, and keys.
func scopedServer(t *testing.T, keys ...httpapi.Key) *httpapi.Server {
	t.Helper()
	cfg, err := config.Parse([]byte("gateway:\n  chain:\n    - {name: local, model: fake}\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc := answer.New(answer.Options{Router: fleet.New(nil, fleet.Options{})})
	return httpapi.New(httpapi.Options{Answer: svc, Decide: gateway.New(gateway.Options{Config: cfg, Answer: svc}), Keys: keys})
}

// Every route says what it needs: a scope, any key or none, and
// nothing else; the scopes are the configuration's; every route the
// OpenAPI document lists is in the table; and docs/http-api.md shows the
// table as it is.
func TestEveryRouteHasAScope(t *testing.T) {
	if !slices.Equal(scopeNames(httpapi.Scopes), config.Scopes) {
		t.Errorf("httpapi's scopes %v are not the configuration's %v", httpapi.Scopes, config.Scopes)
	}
	routes := scopedServer(t).Routes()
	have := map[string]httpapi.Scope{}
	for _, r := range routes {
		if !slices.Contains(httpapi.Scopes, r.Needs) && r.Needs != httpapi.AnyKey && r.Needs != httpapi.Open {
			t.Errorf("%s %s needs %q, not a scope, any key or open", r.Method, r.Path, r.Needs)
		}
		have[r.Method+" "+r.Path] = r.Needs
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(web.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if _, ok := have[strings.ToUpper(method)+" "+path]; !ok && path != "/openapi.json" && path != "/docs" {
				t.Errorf("%s %s has no entry in the table of scopes", strings.ToUpper(method), path)
			}
		}
	}

	b, err := os.ReadFile("../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n### Scopes\n")
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile("(?m)^\\| `(\\w+) (\\S+)` \\| (?:`(\\w+)`|(any key|open)) \\|")
	documented := map[string]httpapi.Scope{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented[m[1]+" "+m[2]] = httpapi.Scope(m[3] + m[4])
	}
	if len(documented) == 0 {
		t.Fatal("docs/http-api.md has no table of scopes under ### Scopes")
	}
	for route, needs := range have {
		if documented[route] != needs {
			t.Errorf("docs/http-api.md: %s needs %q; the server says %q", route, documented[route], needs)
		}
	}
	for route := range documented {
		if _, ok := have[route]; !ok {
			t.Errorf("docs/http-api.md lists %s, which the server does not serve", route)
		}
	}
}

func scopeNames(ss []httpapi.Scope) []string {
	var out []string
	for _, s := range ss {
		out = append(out, string(s))
	}
	return out
}

// A key refused for its scope is answered before its rate is counted:
// 403s cost nothing of its bucket, so its one request of the burst is
// still there for a route it may use.
func TestForbiddenCostsNoRate(t *testing.T) {
	srv := httptest.NewServer(scopedServer(t, httpapi.Key{Name: "reader", Secret: "sk-reader",
		Scopes: []httpapi.Scope{httpapi.ScopeRead}, Rate: &httpapi.Rate{PerSecond: 0.001, Burst: 1}}))
	t.Cleanup(srv.Close)
	for range 3 {
		if resp, body := testbin.Do(t, http.DefaultClient, "POST", srv.URL+"/v1/systemone", "{}", "Authorization: Bearer sk-reader"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("POST /v1/systemone with a read key: %d %s", resp.StatusCode, body)
		}
	}
	if resp, body := testbin.Do(t, http.DefaultClient, "GET", srv.URL+"/v1/models", "", "Authorization: Bearer sk-reader"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models after three 403s: %d %s", resp.StatusCode, body)
	}
	if resp, _ := testbin.Do(t, http.DefaultClient, "GET", srv.URL+"/v1/models", "", "Authorization: Bearer sk-reader"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("GET /v1/models past the burst: %d; the key's own rate does not hold", resp.StatusCode)
	}
}
