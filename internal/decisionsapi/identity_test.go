package decisionsapi

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
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
	vllm := `{"object":"list","data":[{"id":"qwen","object":"model","created":1796187424,"owned_by":"vllm","root":"/models/qwen","parent":null,"max_model_len":32768}]}`
	hosted := `{"object":"list","data":[{"id":"gpt-x","object":"model","created":1700000000,"owned_by":"system"}]}`
	for _, tc := range []struct {
		name        string
		status      int
		body, model string
		suffix      string
		want        map[string]string // nil: unknown
	}{
		{"vLLM", 200, vllm, "qwen", "", map[string]string{"owned_by": "vllm", "root": "/models/qwen", "parent": "", "max_model_len": "32768"}},
		{"vLLM, URL with /v1/decisions", 200, vllm, "qwen", "/v1/decisions", map[string]string{"owned_by": "vllm", "root": "/models/qwen", "parent": "", "max_model_len": "32768"}},
		{"hosted", 200, hosted, "gpt-x", "", map[string]string{"owned_by": "system"}},
		{"not listed", 200, hosted, "gpt-y", "", nil},
		{"no list", 404, `{"error":{"message":"no"}}`, "gpt-x", "", nil},
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
	c := &Client{BaseURL: modelList(t, 429, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)}
	var se *Error
	if _, err := c.Identity(context.Background(), "qwen"); !errors.As(err, &se) || se.Status != 429 {
		t.Fatalf("err %v, want a rate-limited Error", err)
	}
	c = &Client{BaseURL: modelList(t, 200, `<html>`)}
	if _, err := c.Identity(context.Background(), "qwen"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err %v, want ErrMalformed", err)
	}
}
