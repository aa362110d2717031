package httpcall_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"system1/internal/httpcall"
)

// A refusal's status and Retry-After stand however its body arrives: cut
// short by the server, or over the size limit. The body only explains the
// status; losing the status to it made a 429 read as a node gone wrong.
func TestStatusStandsWhateverItsBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(w http.ResponseWriter)
	}{
		{"cut short", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error": "slow`))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection drops mid-body
		}},
		{"over the limit", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(strings.Repeat("x", 4096)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				tc.body(w)
			}))
			defer srv.Close()
			hr, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = httpcall.Do(srv.Client(), hr, "", 1024)
			var se *httpcall.StatusError
			if !errors.As(err, &se) || se.Code != http.StatusTooManyRequests || se.RetryAfter != 7*time.Second {
				t.Fatalf("got %v (%#v), want HTTP 429 with Retry-After 7s", err, se)
			}
			if len(se.Body) > 1024 {
				t.Errorf("body of %d bytes kept, more than the limit", len(se.Body))
			}
		})
	}
}
