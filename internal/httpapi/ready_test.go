package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"system1/internal/answer"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/testbin"
)

// GET /livez is 200 whatever the readiness; GET /readyz is 503 with the
// conditions not met while there are any (draining named as such), 200
// once there are none. With auth on, a caller without a key gets the
// conditions without their detail (which names models and nodes), a
// caller with one gets it whole; neither route needs a key.
func TestLivezAndReadyz(t *testing.T) {
	var mu sync.Mutex
	var missing []httpapi.NotReady
	set := func(nr ...httpapi.NotReady) {
		mu.Lock()
		defer mu.Unlock()
		missing = nr
	}
	api := httpapi.New(httpapi.Options{
		Answer: answer.New(answer.Options{Router: fleet.New(nil, fleet.Options{})}),
		Keys:   []httpapi.Key{{Name: "test", Secret: "sk-test"}},
		Ready: func() []httpapi.NotReady {
			mu.Lock()
			defer mu.Unlock()
			return missing
		},
	})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	get := func(path string, headers ...string) (int, httpapi.Readiness) {
		t.Helper()
		resp, body := testbin.Do(t, srv.Client(), http.MethodGet, srv.URL+path, "", headers...)
		if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s: Cache-Control %q", path, cc)
		}
		var r httpapi.Readiness
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
		return resp.StatusCode, r
	}
	nodes := httpapi.NotReady{Check: httpapi.CheckNodes, Detail: "model m: no node serving it has answered a health probe yet (nodes: gpu-1)"}
	for _, tc := range []struct {
		name    string
		missing []httpapi.NotReady
		status  int
		word    string
	}{
		{"nodes not ready", []httpapi.NotReady{nodes}, 503, httpapi.StatusNotReady},
		{"ready", nil, 200, httpapi.StatusReady},
		{"draining", []httpapi.NotReady{{Check: httpapi.CheckDraining, Detail: "shutting down"}}, 503, httpapi.StatusDraining},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set(tc.missing...)
			if code, r := get("/livez"); code != 200 || r.Status != "ok" {
				t.Errorf("/livez: %d %+v", code, r)
			}
			code, anon := get("/readyz")
			if code != tc.status || anon.Status != tc.word || len(anon.NotReady) != len(tc.missing) {
				t.Fatalf("/readyz without a key: %d %+v, want %d %s", code, anon, tc.status, tc.word)
			}
			_, keyed := get("/readyz", "Authorization: Bearer sk-test")
			for i, want := range tc.missing {
				if anon.NotReady[i] != (httpapi.NotReady{Check: want.Check}) {
					t.Errorf("without a key: %+v, want the check alone", anon.NotReady[i])
				}
				if keyed.NotReady[i] != want {
					t.Errorf("with a key: %+v, want %+v", keyed.NotReady[i], want)
				}
			}
		})
	}
}
