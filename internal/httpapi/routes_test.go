package httpapi_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// Requests no route serves (404s, and 405s of a known path) are counted
// under the route "unmatched", never under the page's "/".
func TestUnmatchedRequestsAreNotThePage(t *testing.T) {
	s := serve(t, setup{nodes: []node{startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})}})
	s.do(t, http.MethodGet, "/nothing", "")
	s.do(t, http.MethodGet, "/v1/systemone", "")
	s.do(t, http.MethodPost, "/", "")
	s.do(t, http.MethodGet, "/v1/decisions", "") // OpenAI's envelope, still unmatched
	s.do(t, http.MethodPost, "/v1/models/x/y", "")
	if resp, _ := testbin.Do(t, http.DefaultClient, http.MethodGet, s.URL+"/", ""); resp.StatusCode != http.StatusOK { // the page, not JSON
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	m := string(s.do(t, http.MethodGet, "/metrics", "").body)
	for _, want := range []string{
		`system1_requests_total{code="404",key="",route="unmatched"} 1`,
		`system1_requests_total{code="405",key="",route="unmatched"} 4`,
		`system1_requests_total{code="200",key="",route="GET /{$}"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if bad := regexp.MustCompile(`system1_requests_total\{code="\d+",key="[^"]*",route="/"\}`).FindString(m); bad != "" {
		t.Errorf("metrics count requests under the route /: %s", bad)
	}
}
