package ollama

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"system1/internal/engine"
)

// paths serves each path's body, 404 to the rest.
func paths(t *testing.T, bodies map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The identity of the recorded replies: the digest, size and details of
// the model's /api/tags entry and the server's version, nothing of when
// it was made.
func TestIdentityFromRecordedReplies(t *testing.T) {
	tags, version := recorded(t, "tags.json"), recorded(t, "version.json")
	want := map[string]string{
		"digest":             "bb3e564c1061854b7d335b05c3ad7d9caebd4cf2e8d831f31eac8368404a3966",
		"size":               "1185762",
		"format":             "gguf",
		"family":             "llama",
		"families":           "llama",
		"parameter_size":     "293K",
		"quantization_level": "unknown",
		"version":            "0.0.0",
	}
	for _, tc := range []struct{ name, tags, model string }{
		{"by name", tags, "tiny:latest"},
		{"without the tag", tags, "tiny"},
		{"pulled again later", strings.Replace(tags, "2026-11-30T17:16:43", "2026-12-24T09:00:00", 1), "tiny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{BaseURL: paths(t, map[string]string{"/api/tags": tc.tags, "/api/version": version})}
			id, err := e.Identity(context.Background(), tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if id.Source != identitySource || !maps.Equal(id.Fields, want) {
				t.Fatalf("identity %v, want %v", id, want)
			}
		})
	}
}

func TestIdentityFailures(t *testing.T) {
	tags, version := recorded(t, "tags.json"), recorded(t, "version.json")
	for _, tc := range []struct {
		name   string
		bodies map[string]string
		model  string
		kind   engine.FailureKind
	}{
		{"a model not served", map[string]string{"/api/tags": tags, "/api/version": version}, "tiny:q8", engine.Unavailable},
		{"no digest", map[string]string{"/api/tags": strings.Replace(tags, `"digest":"bb3e564c1061854b7d335b05c3ad7d9caebd4cf2e8d831f31eac8368404a3966"`, `"digest":""`, 1), "/api/version": version}, "tiny", engine.Malformed},
		{"no version", map[string]string{"/api/tags": tags}, "tiny", engine.Unavailable},
		{"not JSON", map[string]string{"/api/tags": "<html>", "/api/version": version}, "tiny", engine.Malformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{BaseURL: paths(t, tc.bodies)}
			_, err := e.Identity(context.Background(), tc.model)
			var f *engine.Failure
			if !errors.As(err, &f) || f.Kind != tc.kind {
				t.Fatalf("err %v, want a %s failure", err, tc.kind)
			}
		})
	}
}

func TestTagged(t *testing.T) {
	for in, want := range map[string]string{
		"tiny":                        "tiny:latest",
		"tiny:q8":                     "tiny:q8",
		"registry.local:5000/org/m":   "registry.local:5000/org/m:latest",
		"registry.local:5000/org/m:1": "registry.local:5000/org/m:1",
		"":                            "",
	} {
		if got := Tagged(in); got != want {
			t.Errorf("Tagged(%q) = %q, want %q", in, got, want)
		}
	}
}
