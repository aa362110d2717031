package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"system1/internal/systemone"
)

// Every request gets one line with its id (the one its reply carries),
// method, path, status, time taken, the caller's address and what its
// handler noted; none when the logger does not take info lines.
func TestAccessLine(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noteLog(r.Context(), "warnings", []string{"a", "b c"})
		w.WriteHeader(http.StatusTeapot)
	})
	line := regexp.MustCompile(`^time=\S+ level=INFO msg=request id=(req_[0-9a-f]{32}) method=PUT path=/some/where status=418 ` +
		`ms=[0-9.e-]+ remote=192\.0\.2\.1:1234 warnings="\[a b c\]"\n$`)
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn} {
		var buf bytes.Buffer
		s := New(Options{Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})), NoPage: true})
		w := httptest.NewRecorder()
		s.observe(handler).ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/some/where?q=1", nil))
		if level > slog.LevelInfo {
			if buf.Len() > 0 {
				t.Errorf("logged at level %v: %s", level, buf.String())
			}
			continue
		}
		m := line.FindStringSubmatch(buf.String())
		if m == nil {
			t.Fatalf("the line %q", buf.String())
		}
		if id := w.Header().Get(systemone.RequestIDHeader); m[1] != id {
			t.Errorf("the line's id %s, the reply's %s", m[1], id)
		}
	}
}

// BenchmarkAccessLine is observe around a handler that does nothing, its
// line formatted by slog's text handler as serve's is and then dropped.
func BenchmarkAccessLine(b *testing.B) {
	s := New(Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NoPage: true})
	h := s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	r := httptest.NewRequest(http.MethodPost, "/v1/systemone", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
