package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"system1/internal/fakeengine"
)

// want422 checks that r is /v1's 422, its param naming param and its one
// problem at loc.
func want422(t *testing.T, r reply, param string, loc ...string) validationError {
	t.Helper()
	var e validationError
	if r.status != http.StatusUnprocessableEntity || json.Unmarshal(r.body, &e) != nil || e.Error.Type != "invalid_request_error" || len(e.Detail) != 1 {
		t.Fatalf("not /v1's 422 shape: %s", r)
	}
	if e.Error.Param == nil || *e.Error.Param != param || !slices.Equal(e.Detail[0].Loc, loc) {
		t.Errorf("param %v, loc %q; want %q at %q: %s", e.Error.Param, e.Detail[0].Loc, param, loc, r)
	}
	return e
}

// A request header out of its values, or given twice, is a 422 in the
// shape of every other: param naming the header, detail a list of {loc,
// msg, type} with loc ["header", name].
func TestHeaderProblemsAreValidationErrors(t *testing.T) {
	s := serve(t, setup{nodes: []node{startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})}})
	for _, tc := range []struct {
		name, header string
		values       []string
	}{
		{"debias", "X-System1-Debias", []string{"sometimes"}},
		{"debias twice", "X-System1-Debias", []string{"off", "off"}},
		{"prior", "X-System1-Prior", []string{"sometimes"}},
		{"prior empty", "X-System1-Prior", []string{""}},
		{"prior twice", "X-System1-Prior", []string{"batch", "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+"/v1/systemone", strings.NewReader(colour("a,b")))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for _, v := range tc.values {
				req.Header.Add(tc.header, v)
			}
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := want422(t, reply{status: resp.StatusCode, header: resp.Header, body: body}, tc.header, "header", tc.header)
			if !strings.Contains(e.Detail[0].Msg, "once") {
				t.Errorf("msg %q does not say what is accepted", e.Detail[0].Msg)
			}
		})
	}
}
