package openai

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"system1/internal/engine"
)

// An error body without an OpenAI envelope is cut as every engine's is
// (httpcall.Excerpt), at a character's start: a body of multi-byte
// characters gives a message of valid UTF-8.
func TestErrorBodyIsCutAtACharacter(t *testing.T) {
	body := "x" + strings.Repeat("€", 150)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	e := &Engine{BaseURL: srv.URL}
	_, err := e.Read(t.Context(), "m", engine.Prompt{Question: "q", Labels: []string{"A", "B"}})
	var f *engine.Failure
	if !errors.As(err, &f) {
		t.Fatalf("error %v, want an *engine.Failure", err)
	}
	msg := f.Err.Error()
	if want := "x" + strings.Repeat("€", 66); !utf8.ValidString(msg) || msg != want {
		t.Fatalf("message %q (valid UTF-8: %v), want %q", msg, utf8.ValidString(msg), want)
	}
}
