package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// A query parameter whose name or value does not decode (a bad percent
// escape, a semicolon, which Go no longer reads as a separator) is
// refused naming it, rather than dropped for a report of the defaults.
func TestReportQueryThatDoesNotDecode(t *testing.T) {
	s, _, _, _ := logServe(t)
	for _, tc := range []struct{ path, param string }{
		{"/v1/calibration?window=%zz", "window"},
		{"/v1/calibration?window=1h;target_error=0.5", "window"},
		{"/v1/shadow?window=1%", "window"},
		{"/v1/usage?since=2026-12-01&until=%G1", "until"},
		{"/v1/usage?group_by=key;model", "group_by"},
	} {
		e := want422(t, s.do(t, http.MethodGet, tc.path, "", auth), tc.param, "query", tc.param)
		if !strings.Contains(e.Detail[0].Msg, "decode") {
			t.Errorf("%s: msg %q", tc.path, e.Detail[0].Msg)
		}
	}
}
