package httpapi_test

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/testbin"
)

// A request no node answered is a 503 whose body names no node's
// address (redacted for the caller), and whose log line says why in the
// node's own words, address and all: the operator's log keeps them
// (docs/http-api.md, What callers see), on each answering route.
func TestFailureIsOnTheLogLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: the node refuses connections
	n, err := fleet.NewNode(config.Node{Name: "gpu-1", URL: "http://" + addr, Dialect: "llamacpp", Models: []string{"fake"}},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{n}, fleet.Options{Policy: fleet.Policy{AllowedFails: 1000, Window: 1, Cooldown: 1}})
	var mu sync.Mutex
	var logged strings.Builder
	api := httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: router}), Version: "test",
		Log: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	q := `{"u":{"type":"noul","instructions":"Yes?"}}`
	for _, c := range []struct{ path, body string }{
		{"/v1/systemone", `{"model":"fake","state":"a ticket","questions":` + q + `}`},
		{"/v1/systemone/batch", `{"model":"fake","states":["a ticket"],"questions":` + q + `}`},
		{"/v1/decisions", `{"model":"fake","input":"a ticket","questions":[{"type":"predicate","instructions":"Yes?"}]}`},
	} {
		mu.Lock()
		logged.Reset()
		mu.Unlock()
		resp, body := testbin.Do(t, http.DefaultClient, http.MethodPost, srv.URL+c.path, c.body)
		if resp.StatusCode < 500 {
			t.Fatalf("%s: %d %s, want a 5xx", c.path, resp.StatusCode, body)
		}
		if strings.Contains(string(body), addr) {
			t.Errorf("%s: the reply names the node's address: %s", c.path, body)
		}
		mu.Lock()
		line := logged.String()
		mu.Unlock()
		if !strings.Contains(line, "status="+resp.Status[:3]) || !strings.Contains(line, addr) {
			t.Errorf("%s: the log line does not say why, with the node's address %s:\n%s(the reply: %s)", c.path, addr, line, body)
		}
	}
}

// A batch some of whose states no node answered is a 200, and its log
// line says which states failed and why, in the node's words, as a
// request alone that failed says it: at most three, then how many more.
func TestBatchFailuresAreOnTheLogLine(t *testing.T) {
	poison := func(r fakeengine.Request) []float64 {
		lp := fakeengine.Halving(r.Labels)
		if p, _ := fakeengine.ParsePrompt(r.User); strings.Contains(p.State, "poison") {
			lp[0] = 0.5 // not a log-probability: no answer for it
		}
		return lp
	}
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Prompted: poison}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "gpu-1", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{n}, fleet.Options{Policy: fleet.Policy{AllowedFails: 1000, Window: 1, Cooldown: 1}})
	var mu sync.Mutex
	var logged strings.Builder
	api := httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: router}), Version: "test", RequestTimeout: time.Minute,
		Log: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	q := `{"u":{"type":"noul","instructions":"Yes?"}}`
	for _, c := range []struct {
		states    string
		want, not []string
	}{
		{`["fine","poison","fine too"]`, []string{`states.1: question`, `\"u\"`}, []string{"states.0", "states.2", "more"}},
		{`["fine","poison 1","poison 2","poison 3","poison 4","poison 5"]`,
			[]string{"states.1: question", "states.2: question", "states.3: question", "and 2 more"}, []string{"states.0", "states.4", "states.5"}},
	} {
		mu.Lock()
		logged.Reset()
		mu.Unlock()
		resp, body := testbin.Do(t, http.DefaultClient, http.MethodPost, srv.URL+"/v1/systemone/batch", `{"model":"fake","states":`+c.states+`,"questions":`+q+`}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		mu.Lock()
		line := logged.String()
		mu.Unlock()
		for _, w := range c.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: the log line lacks %q:\n%s", c.states, w, line)
			}
		}
		for _, w := range c.not {
			if strings.Contains(line, w) {
				t.Errorf("%s: the log line has %q:\n%s", c.states, w, line)
			}
		}
	}
}
