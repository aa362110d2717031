package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/pause"
)

// GET /health carries the decide gateway's pause switch: off, on after
// toggle off, and paused with what is wrong when the state file is
// unreadable (it fails closed).
func TestHealthShowsThePauseSwitch(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	fn, err := fleet.NewNode(n.cfg, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{fn}, fleet.Options{Policy: testPolicy})
	cfg, err := config.Parse([]byte("gateway:\n  chain:\n    - {name: local, model: fake}\n"))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), pause.FileName)
	svc := answer.New(answer.Options{Router: router})
	api := httpapi.New(httpapi.Options{Answer: svc, Rounding: 2,
		Decide: gateway.New(gateway.Options{Config: cfg, Answer: svc, StatePath: state})})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	s := &system1{URL: srv.URL, client: &http.Client{Transport: checker{t: t, base: http.DefaultTransport}}}

	health := func() (paused *bool, problem string) {
		t.Helper()
		r := s.do(t, http.MethodGet, "/health", "")
		var body struct {
			Paused       *bool  `json:"paused"`
			PauseProblem string `json:"pause_problem"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &body) != nil {
			t.Fatalf("/health: %s", r)
		}
		return body.Paused, body.PauseProblem
	}
	if p, problem := health(); p == nil || *p || problem != "" {
		t.Errorf("no state file: paused %v, problem %q; want false", p, problem)
	}
	if _, err := pause.Write(state, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	if p, problem := health(); p == nil || !*p || problem != "" {
		t.Errorf("after toggle off: paused %v, problem %q; want true", p, problem)
	}
	if err := os.WriteFile(state, []byte(`{"paused":`), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, problem := health(); p == nil || !*p || !strings.Contains(problem, "unreadable") || !strings.Contains(problem, "system1 toggle on") {
		t.Errorf("corrupt state file: paused %v, problem %q; want paused with the repair", p, problem)
	}
}
