package e2e

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"system1/internal/fakeengine"
)

// A request its client abandons (an SDK's timeout or abort) while the
// engine still thinks is no outage: its log line and
// system1_requests_total say 499, as proxies count it, never 503, and
// no provider is logged as failed for it. The engine call is held at a
// gate until the client has gone, so the test never races the engine.
func TestAbandonedRequestIs499(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{})
	g := newGate(t, f.URL)
	s := startServe(t, "nodes:\n"+engineNode("engine", g.URL, "fake", "")+"gateway:\n  chain:\n    - {name: local, model: fake}\n", serveOpts{})
	for _, route := range []struct{ path, body string }{
		{"/v1/systemone", choice("fake", "abandoned")},
		{"/v1/decide", `{"question":"Abandoned?"}`},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+route.path, strings.NewReader(route.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		g.await(t, 1)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: the client's request ended with %v, not its cancellation", route.path, err)
		}
		s.waitLog(t, regexp.MustCompile(`msg=request .*path=`+regexp.QuoteMeta(route.path)+` status=499 `), 1, time.Minute)
	}
	body := string(do(t, client(), http.MethodGet, s.URL+"/metrics", "", "").Body)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "system1_requests_total{") && strings.Contains(line, `code="503"`) {
			t.Errorf("an abandoned request counted as a 503: %s", line)
		}
	}
	// The engine calls the client left are counted as cancelled, not as
	// the node's errors.
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "system1_engine_attempts_total{") && !strings.Contains(line, `outcome="canceled"`) && !strings.Contains(line, `outcome="ok"`) {
			t.Errorf("an abandoned request's engine call counted as a failure: %s", line)
		}
	}
	if !strings.Contains(body, `outcome="canceled"`) {
		t.Errorf("no engine call counted as cancelled:\n%s", grep(body, "system1_engine_attempts_total"))
	}
	for _, route := range []string{"/v1/systemone", "/v1/decide"} {
		if !regexp.MustCompile(`system1_requests_total\{code="499",key="",route="[A-Z]* ?` + regexp.QuoteMeta(route) + `"\} 1`).MatchString(body) {
			t.Errorf("system1_requests_total has no 499 for %s:\n%s", route, grep(body, "system1_requests_total"))
		}
	}
	if text := s.log.String(); strings.Contains(text, `msg="provider failed"`) || strings.Contains(text, "status=503") || strings.Contains(text, "overall deadline") {
		t.Errorf("an abandoned request was logged as a failure:\n%s", text)
	}
}

// grep is the lines of text that contain s.
func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
