package web_test

import (
	"math"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"system1/internal/web"
)

// The page, its assets, /docs and /openapi.json are served with the
// security headers; every other unknown path is still Jev's 404.
func TestRoutes(t *testing.T) {
	s := serve(t, options{})
	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
		has          string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", `<script type="module" src="/ui/app.js">`},
		{"HEAD", "/", 200, "text/html; charset=utf-8", ""},
		{"GET", "/docs", 200, "text/html; charset=utf-8", `/ui/docs.js`},
		{"GET", "/ui/app.js", 200, "text/javascript; charset=utf-8", "sessionStorage"},
		{"GET", "/ui/app.css", 200, "text/css; charset=utf-8", ".bar"},
		{"GET", "/openapi.json", 200, "application/json", `"openapi": "3.1.0"`},
		{"GET", "/ui/nothing.js", 404, "application/json", `{"detail":"Not Found"}`},
		{"GET", "/ui/", 404, "application/json", `{"detail":"Not Found"}`},
		{"GET", "/index.html", 404, "application/json", `{"detail":"Not Found"}`},
		{"GET", "/v2/anything", 404, "application/json", `{"detail":"Not Found"}`},
		{"POST", "/", 405, "application/json", `{"detail":"Method Not Allowed"}`},
		{"GET", "/docs/x", 404, "application/json", `{"detail":"Not Found"}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, body := do(t, tc.method, s.URL+tc.path, "")
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.contentType {
				t.Fatalf("%d %q, want %d %q: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, tc.contentType, body)
			}
			if !strings.Contains(string(body), tc.has) {
				t.Errorf("body does not hold %q: %.300s", tc.has, body)
			}
			if tc.status != 200 {
				return
			}
			for k, want := range map[string]string{
				"X-Content-Type-Options": "nosniff",
				"X-Frame-Options":        "DENY",
				"Referrer-Policy":        "no-referrer",
				"Cache-Control":          "no-cache",
			} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
			csp := resp.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("Content-Security-Policy allows inline code: %q", csp)
			}
			if resp.Header.Get("Etag") == "" {
				t.Error("no ETag")
			}
		})
	}
	t.Run("revalidation", func(t *testing.T) {
		resp, _ := get(t, s.URL+"/ui/app.js")
		again, body := get(t, s.URL+"/ui/app.js", "If-None-Match: "+resp.Header.Get("Etag"))
		if again.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Fatalf("%d with %d bytes, want 304 and none", again.StatusCode, len(body))
		}
	})
}

// With auth on the page is served to anyone (it holds no data) while the
// API still refuses a caller without a key.
func TestPagePublicAPINot(t *testing.T) {
	s := serve(t, options{keys: []string{"sk-test"}})
	if resp, _ := get(t, s.URL+"/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / with auth on: %d", resp.StatusCode)
	}
	if resp, _ := get(t, s.URL+"/openapi.json"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi.json with auth on: %d", resp.StatusCode)
	}
	if resp, _ := get(t, s.URL+"/v1/models"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/models without a key: %d", resp.StatusCode)
	}
}

// No script or style is inline: the policy would block it, so a page that
// needed one would be broken.
func TestNoInlineCode(t *testing.T) {
	s := serve(t, options{})
	for _, p := range []string{"/", "/docs"} {
		_, body := get(t, s.URL+p)
		html := string(body)
		for _, bad := range []string{"<script>", "style=", " onclick=", " onload=", " onsubmit=", "javascript:"} {
			if strings.Contains(html, bad) {
				t.Errorf("%s holds %q", p, bad)
			}
		}
	}
}

// The page's weight: the bytes served for / and for every asset, as a
// browser fetches them uncompressed. It is logged (go test -v -run
// TestPageWeight ./internal/web) and held under a budget so that it stays
// small. The reference at /docs loads docs.js (and the shared dom.js and
// app.css) and /openapi.json instead of the page's modules.
func TestPageWeight(t *testing.T) {
	const budget = 64 << 10
	s := serve(t, options{})
	files := web.Files()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	size := map[string]int{}
	for _, p := range append(paths, "/openapi.json") {
		resp, body := get(t, s.URL+p)
		if resp.StatusCode != http.StatusOK || (p != "/openapi.json" && len(body) != files[p]) {
			t.Fatalf("%s: %d, %d bytes, want 200 and %d", p, resp.StatusCode, len(body), files[p])
		}
		t.Logf("%-20s %6d bytes", p, len(body))
		size[p] = len(body)
	}
	page := 0
	for _, p := range paths {
		if p != "/docs" && p != "/ui/docs.js" {
			page += size[p]
		}
	}
	docs := size["/docs"] + size["/ui/docs.js"] + size["/ui/dom.js"] + size["/ui/app.css"] + size["/openapi.json"]
	t.Logf("/ with everything it loads: %d bytes; /docs with everything it loads: %d bytes", page, docs)
	if page > budget {
		t.Errorf("the page weighs %d bytes, over its budget of %d", page, budget)
	}
}

// docs/http-api.md says what the page weighs with everything it loads;
// the figure is the page's, within a tenth.
func TestPageWeightIsTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`about (\d+) KB with everything it loads`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/http-api.md no longer says what the page weighs")
	}
	said, _ := strconv.Atoi(string(m[1]))
	page := 0
	for p, n := range web.Files() {
		if p != "/docs" && p != "/ui/docs.js" {
			page += n
		}
	}
	if kb := float64(page) / 1000; math.Abs(kb-float64(said)) > kb/10 {
		t.Errorf("docs/http-api.md says the page weighs about %d KB with everything it loads; it weighs %d bytes", said, page)
	}
}
