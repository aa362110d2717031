package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A query parameter given twice is refused, naming it, rather than read
// as its first value, so that the status does not depend on the order.
func TestCalibrationQueryParamTwice(t *testing.T) {
	s, _, _, _ := logServe(t)
	for _, q := range []string{"window=1h&window=7d", "target_error=0.5&target_error=0.01", "max_in_scope_loss=0.1&max_in_scope_loss=0.2"} {
		param, _, _ := strings.Cut(q, "=")
		e := want422(t, s.do(t, http.MethodGet, "/v1/calibration?"+q, "", auth), param, "query", param)
		if !strings.Contains(e.Detail[0].Msg, "twice") {
			t.Errorf("%s: msg %q", q, e.Detail[0].Msg)
		}
	}
	want422(t, s.do(t, http.MethodGet, "/v1/calibration?window=soon", "", auth), "window", "query", "window")
}

// The report's window ends when it is made, not in the future.
func TestCalibrationUntilIsNow(t *testing.T) {
	s, _, _, _ := logServe(t)
	r := s.do(t, http.MethodGet, "/v1/calibration?window=1h", "", auth)
	after := time.Now()
	var rep struct{ Since, Until time.Time }
	if err := json.Unmarshal(r.body, &rep); err != nil || r.status != http.StatusOK {
		t.Fatalf("%s", r)
	}
	if rep.Until.After(after) {
		t.Errorf("until %s is after the reply came (%s)", rep.Until, after)
	}
	if d := rep.Until.Sub(rep.Since); d != time.Hour {
		t.Errorf("the window is %s, want 1h", d)
	}
}

// A query parameter the report does not take (a misspelt target_error,
// a window by another name), or whose name or value does not decode (a
// bad percent escape, a semicolon, which Go no longer reads as a
// separator), is refused naming it, as GET /v1/usage refuses one, rather
// than ignored for a report of the defaults.
func TestReportQueryUnknownParam(t *testing.T) {
	s, _, _, _ := logServe(t)
	for _, tc := range []struct{ path, param, msg string }{
		{"/v1/calibration?window=24h&target_eror=0.05", "target_eror", "not a parameter"},
		{"/v1/calibration?windows=24h", "windows", "not a parameter"},
		{"/v1/shadow?since=2026-12-01", "since", "not a parameter"},
		{"/v1/calibration?window=%zz", "window", "decode"},
		{"/v1/calibration?window=1h;target_error=0.5", "window", "decode"},
		{"/v1/shadow?window=1%", "window", "decode"},
		{"/v1/usage?since=2026-12-01&until=%G1", "until", "decode"},
		{"/v1/usage?group_by=key;model", "group_by", "decode"},
	} {
		e := want422(t, s.do(t, http.MethodGet, tc.path, "", auth), tc.param, "query", tc.param)
		if !strings.Contains(e.Detail[0].Msg, tc.msg) {
			t.Errorf("%s: msg %q, want it to say %q", tc.path, e.Detail[0].Msg, tc.msg)
		}
	}
}
