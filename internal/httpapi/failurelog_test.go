package httpapi_test

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
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
