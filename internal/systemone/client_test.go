package systemone

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"system1/internal/decision"
)

// A model the endpoint does not serve, answered as hosted Jev answers it
// (a 400 "Unknown model: …"), is read as a 404, a stale model list,
// which the fleet fails over; any other 400 stays the request's.
func TestClientUnknownModel(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"detail":{"error_type":"api_usage_error","message":"Unknown model: jev-9"}}`, http.StatusNotFound},
		{`{"detail":{"error_type":"api_usage_error","message":"Invalid request."}}`, http.StatusBadRequest},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, tc.body)
		}))
		req := decision.Request{Model: "jev-9", State: json.RawMessage(`"s"`), Questions: []decision.Question{{ID: "q", Kind: decision.Noul, Options: decision.NoulOptions(nil, nil)}}}
		_, err := (&Client{BaseURL: srv.URL}).Ask(context.Background(), req)
		srv.Close()
		var se *StatusError
		if !errors.As(err, &se) || se.Code != tc.want {
			t.Errorf("%s: %v, want status %d", tc.body, err, tc.want)
		}
	}
}
