package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/metrics"
)

// The request and the instant upstream's reply of bench/forward: one
// choice and one noul, a reply that passes every client check.
const (
	forwardRequest = `{"model":"jev-stub","state":"Ticket: I was charged twice for my subscription and want a refund.","questions":{` +
		`"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":null,"sales":null}},` +
		`"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`
	forwardReply = `{"model":"jev-stub","answers":{"dept":{"type":"choice","choice":"billing","confidence":0.82,` +
		`"probabilities":{"billing":0.88,"technical":0.12,"sales":0.0}},"urgent":{"type":"noul","noul":0.31}},` +
		`"usage":{"input_tokens":42,"output_tokens":2}}`
)

// BenchmarkForward measures the handler path of a forwarded POST
// /v1/systemone, the work bench/forward.sh measures in CPU per request:
// system1's whole handler (its middleware, the text log line, the
// metrics) called in process, forwarding over loopback to a System One
// upstream that answers at once with a fixed reply, through the HTTP
// client system1 serve builds (fleet.FromConfig). ns/op and allocs/op
// include the stand-in upstream's net/http server, the same before and
// after any change to system1. Serial is one request at a time;
// Parallel is GOMAXPROCS goroutines at once.
func BenchmarkForward(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, forwardReply)
	}))
	b.Cleanup(upstream.Close)
	router, err := fleet.FromConfig(&config.Config{Nodes: []config.Node{{Name: "upstream", URL: upstream.URL, Dialect: "systemone",
		Models: []string{"jev-stub"}, MaxInFlight: 256}}}, fleet.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{
		Answer:   answer.New(answer.Options{Router: router}),
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)), // formatted as system1 serve's, then dropped
		Metrics:  metrics.New(),
		Rounding: 2,
	})
	ask := func() error {
		req := httptest.NewRequest(http.MethodPost, "/v1/systemone", bytes.NewReader([]byte(forwardRequest)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(`"choice":"billing"`)) {
			return fmt.Errorf("status %d: %s", rec.Code, rec.Body)
		}
		return nil
	}
	if err := ask(); err != nil { // and dials the upstream's first connection
		b.Fatal(err)
	}
	b.Run("Serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ask(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := ask(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
