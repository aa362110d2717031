package web_test

import (
	"encoding/json"
	"testing"

	"system1/internal/web"
)

// The document lists X-System1-Cost on every reply the server sends it
// on (docs/http-api.md#cost): the answers of both wires and the batch,
// and /v1/systemone's 422 refusal, whose tokens were spent too.
func TestOpenAPICostHeader(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(web.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, status string }{
		{"/v1/systemone", "200"},
		{"/v1/systemone", "422"},
		{"/v1/decisions", "200"},
		{"/v1/systemone/batch", "200"},
	} {
		if _, ok := doc.Paths[tc.path]["post"].Responses[tc.status].Headers["X-System1-Cost"]; !ok {
			t.Errorf("POST %s's %s lists no X-System1-Cost", tc.path, tc.status)
		}
	}
}
