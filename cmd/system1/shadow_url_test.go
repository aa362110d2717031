package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// shadow --url keeps the base URL's path (a server behind a prefix is
// asked at PREFIX/v1/shadow) and refuses a query or fragment by name,
// where the query swallowed /v1/shadow and the reply was read as no
// report.
func TestShadowURLKeepsItsPath(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/v1/shadow") {
			w.Write([]byte("<html>not here</html>"))
			return
		}
		w.Write([]byte("{}"))
	}))
	defer srv.Close()
	for _, tc := range []struct{ url, path, err string }{
		{srv.URL, "/v1/shadow?window=168h0m0s", ""},
		{srv.URL + "/", "/v1/shadow?window=168h0m0s", ""},
		{srv.URL + "/prefix", "/prefix/v1/shadow?window=168h0m0s", ""},
		{srv.URL + "/prefix/", "/prefix/v1/shadow?window=168h0m0s", ""},
		{srv.URL + "/prefix?x", "", "has a query"},
		{srv.URL + "/#frag", "", "has a fragment"},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		_, stderr, err := cli(t, "shadow", "--report", "--url", tc.url)
		mu.Lock()
		got := asked
		mu.Unlock()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), "--url") || !strings.Contains(err.Error(), tc.err) || len(got) != 0 {
				t.Errorf("--url %s: err %v, asked %v; want an error naming --url and %q, nothing asked", tc.url, err, got, tc.err)
			}
			continue
		}
		if err != nil || len(got) != 1 || got[0] != tc.path {
			t.Errorf("--url %s: err %v (%s), asked %v; want %s", tc.url, err, stderr, got, tc.path)
		}
	}
}
