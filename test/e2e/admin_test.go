package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
)

var adminURL = regexp.MustCompile(`msg="admin listening" url=(http://\S+)`)

// Go's profiler is served on the admin listener when the configuration
// names one, and never on the public port; without admin.listen there is
// no admin listener at all.
func TestAdminListener(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp})
	t.Cleanup(f.Close)
	nodes := fmt.Sprintf("nodes:\n  - {name: n, url: %q, dialect: llamacpp, models: [%s]}\n", f.URL, fakeengine.DefaultModel)
	c := client()

	on := startServe(t, "admin: {listen: 127.0.0.1:0}\n"+nodes, serveOpts{})
	admin := on.waitLog(t, adminURL, 1, 30*time.Second)[0][1]
	if r := do(t, c, http.MethodGet, admin+"/debug/pprof/", "", ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "goroutine") {
		t.Errorf("admin /debug/pprof/: %d %.200s", r.Status, r.Body)
	}
	if r := do(t, c, http.MethodGet, admin+"/debug/pprof/heap?debug=1", "", ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "heap profile") {
		t.Errorf("admin heap profile: %d %.200s", r.Status, r.Body)
	}
	if r := do(t, c, http.MethodGet, admin+"/v1/models", "", ""); r.Status != http.StatusNotFound {
		t.Errorf("the admin listener serves the API: /v1/models %d", r.Status)
	}

	off := startServe(t, nodes, serveOpts{})
	for _, s := range []*server{on, off} {
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
			if r := do(t, c, http.MethodGet, s.URL+path, "", ""); r.Status != http.StatusNotFound {
				t.Errorf("the public port answers %s with %d", path, r.Status)
			}
		}
	}
	if adminURL.MatchString(off.log.String()) {
		t.Error("an admin listener started without admin.listen")
	}
}
