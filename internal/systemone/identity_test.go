package systemone

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func modelList(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" || r.ContentLength > 0 {
			t.Errorf("%s %s with %d bytes: an identity read is a bare GET of the model list", r.Method, r.URL.Path, r.ContentLength)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestIdentity(t *testing.T) {
	jev := `{"models":[{"name":"jev-fast","description":"fast","release_date":"2026-01-01"},{"name":"jev-big","description":"big","release_date":"2026-02-01"}]}`
	openai := `{"object":"list","data":[{"id":"jev-fast","object":"model","created":1796187424,"owned_by":"laya","root":"/models/fast"}]}`
	for _, tc := range []struct {
		name        string
		status      int
		body, model string
		suffix      string
		want        map[string]string // nil: unknown
	}{
		{"Jev's list", 200, jev, "jev-big", "", map[string]string{"description": "big", "release_date": "2026-02-01"}},
		{"Jev's list, URL with /v1/systemone", 200, jev, "jev-fast", "/v1/systemone", map[string]string{"description": "fast", "release_date": "2026-01-01"}},
		{"OpenAI's list", 200, openai, "jev-fast", "", map[string]string{"owned_by": "laya", "root": "/models/fast"}},
		{"not listed", 200, jev, "jev-other", "", nil},
		{"no list (laya-serve)", 404, `{"detail":"Not Found"}`, "jev-fast", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{BaseURL: modelList(t, tc.status, tc.body) + tc.suffix}
			id, err := c.Identity(context.Background(), tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if id.Source != identitySource || id.Known() != (tc.want != nil) || (tc.want != nil && !maps.Equal(id.Fields, tc.want)) {
				t.Fatalf("identity %v, want %v", id, tc.want)
			}
		})
	}
}

func TestIdentityFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		check  func(error) bool
	}{
		{"refused", 503, `{"detail":"down"}`, func(err error) bool {
			var se *StatusError
			return errors.As(err, &se) && se.Code == 503 && se.Message == "down"
		}},
		{"not JSON", 200, `<html>`, func(err error) bool { return errors.Is(err, ErrMalformed) }},
		{"too large", 200, `{"models":[{"name":"` + strings.Repeat("x", 1<<20) + `"}]}`, func(err error) bool { return errors.Is(err, ErrMalformed) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{BaseURL: modelList(t, tc.status, tc.body)}
			if _, err := c.Identity(context.Background(), "m"); !tc.check(err) {
				t.Fatalf("err %v", err)
			}
		})
	}
}
