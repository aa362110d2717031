package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"system1/internal/config"
	"system1/internal/fakeengine"
)

// A node's reply whose token counts, at the node's price, cost more
// than an int64 of pico-dollars holds leaves the cost unknown (no
// X-System1-Cost), never the wrapped number (0 for 2^63-1 tokens at a
// dollar a million); so does a batch whose states' costs sum past it. A
// cost just within it is said exactly.
func TestCostPastWhatItHoldsIsUnknown(t *testing.T) {
	one := config.Dollars(1_000_000_000_000) // a dollar, in pico-dollars
	for _, tc := range []struct {
		name, path string
		input      int64
		want       string // "" for no header
	}{
		{"within", "/v1/systemone", 9_000_000_000_000, "9000000.000001"},
		{"2^63-1 tokens", "/v1/systemone", 9_223_372_036_854_775_807, ""},
		{"2^62 tokens", "/v1/systemone", 4_611_686_018_427_387_904, ""},
		{"just past", "/v1/systemone", 9_223_372_036_854, ""},
		{"a batch whose sum is past", "/v1/systemone/batch", 5_000_000_000_000, ""},
		{"a batch within", "/v1/systemone/batch", 4_000_000_000_000, "8000000.000002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := fakeengine.StartSystemOne(t, fakeengine.Reply{Raw: fmt.Sprintf(
				`{"model":"fake-1","answers":{"urgent":{"type":"noul","noul":0.8}},"usage":{"input_tokens":%d,"output_tokens":1}}`, tc.input)})
			n := node{cfg: config.Node{Name: "jev", URL: ep.URL, Dialect: "systemone", Models: []string{fakeengine.DefaultModel},
				Price: &config.Price{InputPerMTok: &one, OutputPerMTok: &one}}}
			s := serve(t, setup{nodes: []node{n}})
			body := `{"model":"fake","state":"s","questions":{"urgent":{"type":"noul","instructions":"Urgent?"}}}`
			if tc.path == "/v1/systemone/batch" {
				body = `{"model":"fake","states":["a","b"],"questions":{"urgent":{"type":"noul","instructions":"Urgent?"}}}`
			}
			r := s.do(t, http.MethodPost, tc.path, body)
			if r.status != http.StatusOK {
				t.Fatalf("got %s", r)
			}
			if got, ok := r.header["X-System1-Cost"]; tc.want == "" && ok || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
				t.Errorf("X-System1-Cost %q; want %q (none: unknown)", got, tc.want)
			}
		})
	}
}
