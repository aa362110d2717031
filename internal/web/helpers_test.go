package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/metrics"
	"system1/internal/outcomes"
	"system1/internal/testbin"
)

// server is system1 serve's HTTP face over the real router, dialect
// engines and gateway, in front of fake engines.
type server struct {
	URL     string
	handler http.Handler // the server's handler, for calls in process
	router  *fleet.Router
	fakes   []*fakeengine.Fake
	stop    func() // closes the server, as a restart or a dropped network would
}

// options vary what a test serves.
type options struct {
	keys []string
	// admin adds a key "admin" (sk-admin) holding the admin scope
	// alone, which no route of the public listener needs.
	admin  bool
	nodes  int  // fake llama.cpp nodes, at least one
	noPage bool // leave the page's routes out
	// sick cools the last node down, as a run of failures would.
	sick bool
	// log records answers in a decision log, for /v1/feedback and
	// /v1/calibration.
	log bool
	// notReady is what /readyz says is missing; none is ready.
	notReady []httpapi.NotReady
	// build is the build the fake nodes report they serve (fakeengine's
	// Build), for their fingerprints; "" reports none.
	build string
}

// serve starts the server. The nodes serve fakeengine.DefaultModel with
// the default Halving distribution, so the same request always gets the
// same answer; the gateway's one provider asks that model.
func serve(t testing.TB, o options) *server {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 1
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(hc.CloseIdleConnections)
	s := &server{}
	var nodes []*fleet.Node
	cfg := &config.Config{Providers: []config.Provider{{Name: "local", Kind: "engine", Model: fakeengine.DefaultModel}}}
	for i := range o.nodes {
		b := fakeengine.Behavior{}
		if o.sick && i == o.nodes-1 {
			b = fakeengine.Behavior{Fault: fakeengine.Status, Status: http.StatusInternalServerError}
		}
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: b, Build: o.build})
		t.Cleanup(f.Close)
		s.fakes = append(s.fakes, f)
		c := config.Node{Name: "node" + string(rune('a'+i)), URL: f.URL, Dialect: string(fakeengine.LlamaCpp), Models: []string{fakeengine.DefaultModel}}
		cfg.Nodes = append(cfg.Nodes, c)
		n, err := fleet.NewNode(c, func(string) string { return "" }, hc)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	m := metrics.New()
	s.router = fleet.New(nodes, fleet.Options{Policy: fleet.Policy{AllowedFails: 1, Window: time.Hour, Cooldown: time.Hour}, Observer: m})
	s.router.Refresh(t.Context())
	g := gateway.New(gateway.Options{Config: cfg, Answer: answer.New(answer.Options{Router: s.router}), Version: "test"})
	opt := httpapi.Options{
		Answer:   answer.New(answer.Options{Router: s.router}),
		Metrics:  m,
		Keys:     plainKeys(o.keys, o.admin),
		Rounding: 2,
		Decide:   g,
		NoPage:   o.noPage,
		Version:  "test",
		Ready:    func() []httpapi.NotReady { return o.notReady },
	}
	if o.log {
		dlog, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dlog.Close(context.Background()) })
		opt.Answer = answer.New(answer.Options{Router: s.router, Recorder: dlog})
		opt.Feedback, opt.DecisionLog = outcomes.NewFeedback(dlog), dlog
	}
	api := httpapi.New(opt)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	s.URL, s.handler, s.stop = srv.URL, api, srv.Close
	return s
}

// get fetches a path with the given headers ("Name: value").
func get(t testing.TB, url string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodGet, url, "", headers...)
}

func do(t testing.TB, method, url, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	return testbin.Do(t, http.DefaultClient, method, url, body, headers...)
}

// readmeExample is the README's first request to POST /v1/systemone (the
// body of the curl command under "## Asking") and the reply it shows.
func readmeExample(t testing.TB) (request, reply json.RawMessage) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, asking, ok := strings.Cut(string(b), "\n## Asking\n")
	if !ok {
		t.Fatal("README.md has no section ## Asking")
	}
	m := regexp.MustCompile("(?s)```sh\ncurl -s localhost:\\d+/v1/systemone -d '(.*?)'\n```\n```json\n(.*?)\n```").FindStringSubmatch(asking)
	if m == nil {
		t.Fatal("README.md's ## Asking has no curl command to /v1/systemone followed by its JSON reply")
	}
	for i, part := range m[1:] {
		if !json.Valid([]byte(part)) {
			t.Fatalf("README.md's example %s is not JSON: %s", [...]string{"request", "reply"}[i], part)
		}
	}
	return json.RawMessage(m[1]), json.RawMessage(m[2])
}

// plainKeys are keys with every scope, as plain strings in keys are.
// and the admin key where admin says so.
func plainKeys(secrets []string, admin bool) []httpapi.Key {
	var out []httpapi.Key
	for i, k := range secrets {
		out = append(out, httpapi.Key{Name: fmt.Sprintf("keys[%d]", i), Secret: k})
	}
	if admin {
		out = append(out, httpapi.Key{Name: "admin", Secret: "sk-admin", Scopes: []httpapi.Scope{httpapi.ScopeAdmin}})
	}
	return out
}
