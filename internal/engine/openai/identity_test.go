package openai

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"system1/internal/engine"
)

// vllmModels is GET /v1/models in vLLM's shape (its ModelCard), written
// by hand from vLLM's protocol: created is the time of the request.
const vllmModels = `{"object":"list","data":[{"id":"qwen","object":"model","created":1796187424,"owned_by":"vllm","root":"/models/Qwen2.5-0.5B-Instruct","parent":null,"max_model_len":32768,"permission":[{"id":"modelperm-1","object":"model_permission","created":1796187424}]}]}`

// hostedModels is a hosted API's list: no root, no length.
const hostedModels = `{"object":"list","data":[{"id":"gpt-x","object":"model","created":1700000000,"owned_by":"system"}]}`

func serveStatus(t *testing.T, bodies map[string]string, status map[string]int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, ok := status[r.URL.Path]; ok {
			w.WriteHeader(s)
			_, _ = w.Write([]byte(`{"error":{"message":"no"}}`))
			return
		}
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

func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bodies map[string]string
		model  string
		suffix string // added to the base URL
		want   map[string]string
	}{
		{"vLLM", map[string]string{"/v1/models": vllmModels, "/version": `{"version":"0.12.0"}`}, "qwen", "",
			map[string]string{"owned_by": "vllm", "root": "/models/Qwen2.5-0.5B-Instruct", "max_model_len": "32768", "version": "0.12.0"}},
		{"vLLM, base URL with /v1", map[string]string{"/v1/models": vllmModels, "/version": `{"version":"0.12.0"}`}, "qwen", "/v1",
			map[string]string{"owned_by": "vllm", "root": "/models/Qwen2.5-0.5B-Instruct", "max_model_len": "32768", "version": "0.12.0"}},
		{"hosted: no /version", map[string]string{"/v1/models": hostedModels}, "gpt-x", "",
			map[string]string{"owned_by": "system"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{BaseURL: serveStatus(t, tc.bodies, nil) + tc.suffix}
			id, err := e.Identity(context.Background(), tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if id.Source != identitySource || !maps.Equal(id.Fields, tc.want) {
				t.Fatalf("identity %v, want %v", id, tc.want)
			}
		})
	}
}

// A /version that fails otherwise than 404 fails the read: an identity
// without the field would look like another build.
func TestIdentityFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bodies map[string]string
		status map[string]int
		model  string
		kind   engine.FailureKind
	}{
		{"a model not served", map[string]string{"/v1/models": vllmModels}, nil, "other", engine.Unavailable},
		{"/version fails", map[string]string{"/v1/models": vllmModels}, map[string]int{"/version": 503}, "qwen", engine.Unavailable},
		{"/v1/models rate-limited", nil, map[string]int{"/v1/models": 429}, "qwen", engine.RateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{BaseURL: serveStatus(t, tc.bodies, tc.status)}
			_, err := e.Identity(context.Background(), tc.model)
			var f *engine.Failure
			if !errors.As(err, &f) || f.Kind != tc.kind {
				t.Fatalf("err %v, want a %s failure", err, tc.kind)
			}
		})
	}
}
