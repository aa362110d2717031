package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"system1/internal/fakeengine"
	"system1/internal/testbin"
)

// readyz is GET /readyz's answer.
type readyz struct {
	code     int
	Status   string `json:"status"`
	NotReady []struct {
		Check  string `json:"check"`
		Detail string `json:"detail"`
	} `json:"not_ready"`
}

func getReadyz(c *http.Client, base string) (readyz, error) {
	r, err := try(c, http.MethodGet, base+"/readyz", "", "")
	if err != nil {
		return readyz{}, err
	}
	var out readyz
	if err := json.Unmarshal(r.Body, &out); err != nil {
		return readyz{}, fmt.Errorf("/readyz: %v: %s", err, r.Body)
	}
	out.code = r.Status
	return out, nil
}

// awaitReady polls /readyz until it answers 200, failing the test after a
// minute (a hang guard: the probes run every 100 ms here).
func awaitReady(t *testing.T, s *server) readyz {
	t.Helper()
	c := client()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := getReadyz(c, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if r.code == http.StatusOK {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %+v after a minute", r.code, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serve with its one node down: /livez answers 200 and /readyz 503 naming
// the model and its node (auth is off, so the detail shows), while
// /health answers 200 as it always has. The engine then comes up on the
// node's address, and /readyz turns 200 without a restart, once a probe
// has reached it; the same process then answers.
func TestNotReadyUntilANodeAnswers(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{}, "fake")
	addr := testbin.LoopbackAddr(t) // the engine's address, nothing listening yet
	s := startServe(t, "probe_every: 100ms\nnodes:\n"+engineNode("engine", "http://"+addr, "fake", ""), serveOpts{})
	c := client()

	if r := do(t, c, http.MethodGet, s.URL+"/livez", "", ""); r.Status != http.StatusOK {
		t.Errorf("/livez with the node down: %d %s", r.Status, r.Body)
	}
	r, err := getReadyz(c, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if r.code != http.StatusServiceUnavailable || r.Status != "not_ready" || len(r.NotReady) != 1 || r.NotReady[0].Check != "nodes" ||
		!strings.Contains(r.NotReady[0].Detail, "model fake: no node serving it has answered a health probe yet (nodes: engine)") {
		t.Fatalf("/readyz with the node down: %d %+v", r.code, r)
	}
	// /health names why: the probe's failure, said once.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		h := do(t, c, http.MethodGet, s.URL+"/health", "", "")
		var health struct {
			Nodes []struct {
				CoolReason string `json:"cool_reason"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(h.Body, &health); err != nil || h.Status != http.StatusOK || len(health.Nodes) != 1 {
			t.Fatalf("/health with the node down: %d %s", h.Status, h.Body)
		}
		if why := health.Nodes[0].CoolReason; why != "" {
			if !strings.HasPrefix(why, "unavailable: health probe: ") || strings.Count(why, "unavailable") != 1 {
				t.Errorf("the node's cool reason %q: want the probe's failure said once", why)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe cooled the node within a minute: %s", h.Body)
		}
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the engine's address %s: %v", addr, err)
	}
	u, _ := url.Parse(f.URL)
	engine := &http.Server{Handler: httputil.NewSingleHostReverseProxy(u)}
	go func() { _ = engine.Serve(l) }()
	t.Cleanup(func() { engine.Close() })

	awaitReady(t, s)
	if rep := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice("fake", "now ready")); answered(rep) != nil {
		t.Errorf("ready, yet: %v", answered(rep))
	}
	if !strings.Contains(s.log.String(), "msg=\"ready: every configured model has a node that answered a health probe\"") {
		t.Errorf("the log does not say when it became ready")
	}
}

// A configured decision log that cannot be opened keeps /readyz at 503
// (a replica that would record nothing gets no traffic), though the
// nodes answer.
func TestNotReadyWithoutTheDecisionLog(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{}, "fake")
	s := startServe(t, "probe_every: 100ms\nnodes:\n"+engineNode("engine", f.URL, "fake", "")+
		"decision_log: {url: 'postgres://system1@127.0.0.1:1/system1?connect_timeout=1'}\n", serveOpts{})
	c := client()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := getReadyz(c, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if r.code != http.StatusServiceUnavailable || r.Status != "not_ready" || len(r.NotReady) == 0 || r.NotReady[0].Check != "decision_log" {
			t.Fatalf("/readyz with the decision log down: %d %+v", r.code, r)
		}
		if len(r.NotReady) == 1 { // the node has answered: only the log is missing
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never answered a probe: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The decision log's SQLite file removed while serving (a state folder
// cleaned by hand): SQLite writes on into the unlinked file, which no
// reader finds and the disk frees at exit, so /readyz turns 503 naming the
// log, once the writer has looked after a write, and the log says so.
func TestNotReadyOnceTheDecisionLogFileIsRemoved(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{}, "fake")
	db := filepath.Join(t.TempDir(), "decisions.db")
	s := startServe(t, "probe_every: 100ms\nnodes:\n"+engineNode("engine", f.URL, "fake", "")+
		fmt.Sprintf("decision_log: {path: %q}\n", db), serveOpts{})
	awaitReady(t, s)
	c := client()
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		// Each answer is written within the log's linger; the writer looks
		// at its file after a write, at most every 5 s.
		if rep := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice("fake", "after the file went")); answered(rep) != nil {
			t.Fatalf("an answer after the file went: %v", answered(rep))
		}
		r, err := getReadyz(c, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if r.code == http.StatusServiceUnavailable {
			if len(r.NotReady) != 1 || r.NotReady[0].Check != "decision_log" || !strings.Contains(r.NotReady[0].Detail, "removed or replaced while serving") {
				t.Fatalf("/readyz with the log's file gone: %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d a minute after the log's file was removed", r.code)
		}
	}
	s.waitLog(t, regexp.MustCompile(`level=ERROR msg="decision log: its file was removed or replaced while open`), 1, 30*time.Second)
}

// On SIGTERM, /readyz turns 503 (draining) first, while the listener still
// serves: through timeouts.drain_delay it answers requests as before and
// /readyz says draining; then the listener closes and the process exits 0.
func TestDrainingTurnsReadyzFirst(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{}, "fake")
	s := startServe(t, "probe_every: 100ms\ntimeouts: {drain_delay: 5s}\nnodes:\n"+engineNode("engine", f.URL, "fake", ""), serveOpts{})
	awaitReady(t, s)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}

	s.signal(t, syscall.SIGTERM)
	// Each connection is new: the first answer after the signal that is
	// not 200 must be a 503 saying draining, never a refused connection.
	var r readyz
	for {
		var err error
		if r, err = getReadyz(c, s.URL); err != nil {
			t.Fatalf("/readyz after SIGTERM, before it said draining: %v", err)
		}
		if r.code != http.StatusOK {
			break
		}
	}
	if r.code != http.StatusServiceUnavailable || r.Status != "draining" || len(r.NotReady) != 1 || r.NotReady[0].Check != "draining" {
		t.Fatalf("/readyz after SIGTERM: %d %+v", r.code, r)
	}
	if rep := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", choice("fake", "while draining")); answered(rep) != nil {
		t.Errorf("a request while /readyz says draining: %v", answered(rep))
	}
	s.waitLog(t, regexp.MustCompile(`msg="shutting down`), 1, time.Minute)
	waitRefused(t, strings.TrimPrefix(s.URL, "http://"))
	if code := s.wait(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGTERM; want 0", code)
	}
	log := s.log.String()
	if d, sd := strings.Index(log, "msg=\"draining: GET /readyz answers 503"), strings.Index(log, "msg=\"shutting down"); d < 0 || sd < d {
		t.Errorf("the log does not say draining before shutting down:\n%s", log)
	}
}

// A shadow candidate is off the request path: its node being down keeps
// no caller from an answer, so /readyz turns 200 once the served model's
// node answers, and a candidate's outage cannot take every replica out of
// its balancer. The served model's node still counts (the test above).
func TestAShadowCandidatesNodeDownLeavesReadiness(t *testing.T) {
	f := fakeEngine(t, fakeengine.Behavior{}, "fake")
	down := testbin.LoopbackAddr(t) // the candidate's node: nothing listens there
	s := startServe(t, "probe_every: 100ms\ndecision_log: {path: decisions.db}\n"+
		"shadow:\n  - {model: fake, candidate: candidate, share: 1}\nnodes:\n"+
		engineNode("engine", f.URL, "fake", "")+engineNode("shadow-node", "http://"+down, "candidate", ""), serveOpts{})
	r := awaitReady(t, s)
	if r.Status != "ready" || len(r.NotReady) != 0 {
		t.Errorf("/readyz: %+v", r)
	}
	if rep := do(t, client(), http.MethodPost, s.URL+"/v1/systemone", "", choice("fake", "the candidate is down")); answered(rep) != nil {
		t.Errorf("ready, yet: %v", answered(rep))
	}
}
