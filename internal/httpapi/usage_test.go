package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// GET /v1/usage reads its query strictly: an unknown parameter, one
// given twice, a time that does not parse, a window that ends before it
// starts and a group it does not know are each a 422 naming the
// parameter; with none it reports the last 30 days in total.
func TestUsageQuery(t *testing.T) {
	s, _, _, _ := logServe(t)
	for _, tc := range []struct{ query, param, msg string }{
		{"group=key", "group", "not a parameter"},
		{"since=2026-12-01&since=2026-12-02", "since", "twice"},
		{"since=yesterday", "since", "RFC 3339"},
		{"until=2026-13-01", "until", "RFC 3339"},
		{"since=2026-12-02&until=2026-12-01", "until", "after since"},
		{"since=2026-12-01&until=2026-12-01", "until", "after since"},
		// until left to now: the since given is what is wrong.
		{"since=9999-01-01", "since", "before until (now"},
		{"group_by=node", "group_by", `"node" is not one of key, model, day`},
		{"group_by=key,key", "group_by", "twice"},
		{"group_by=key,", "group_by", `"" is not one of`},
		{"group_by=KEY", "group_by", "not one of"},
	} {
		e := want422(t, s.do(t, http.MethodGet, "/v1/usage?"+tc.query, "", auth), tc.param, "query", tc.param)
		if !strings.Contains(e.Detail[0].Msg, tc.msg) {
			t.Errorf("%s: msg %q; want it to say %q", tc.query, e.Detail[0].Msg, tc.msg)
		}
	}
	r := s.do(t, http.MethodGet, "/v1/usage", "", auth)
	var rep struct {
		Since, Until time.Time
		GroupBy      []string `json:"group_by"`
		Groups       []json.RawMessage
		Total        struct{ USD string }
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &rep) != nil {
		t.Fatalf("%s", r)
	}
	if d := rep.Until.Sub(rep.Since); d != 30*24*time.Hour || rep.GroupBy == nil || rep.Groups == nil || rep.Total.USD != "0" {
		t.Errorf("the default report: %s", r.body)
	}
	r = s.do(t, http.MethodGet, "/v1/usage?since=2026-12-01&until=2026-12-02T06:00:00%2B02:00&group_by=day,key", "", auth)
	if err := json.Unmarshal(r.body, &rep); err != nil || r.status != http.StatusOK ||
		rep.Since.Format(time.RFC3339) != "2026-12-01T00:00:00Z" || rep.Until.Format(time.RFC3339) != "2026-12-02T04:00:00Z" ||
		strings.Join(rep.GroupBy, ",") != "day,key" {
		t.Errorf("since and until as a UTC date and a time: %s", r)
	}
}

// A since or until beyond the years a time in nanoseconds holds (1678 to
// 2262), such as 0001-01-01 for "from the start" or 9999-12-31 for "to
// the end", bounds the window as such, never as a wrapped number that
// leaves out every answer.
func TestUsageWindowBeyondNanoseconds(t *testing.T) {
	s, _, _, _ := logServe(t)
	if d := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Urgent?","request_id":"use-1"}`, auth); d.status != http.StatusOK {
		t.Fatal(d)
	}
	for _, tc := range []struct {
		query string
		want  int64
	}{
		{"since=0001-01-01", 1},
		{"since=2000-01-01&until=9999-12-31", 1},
		{"since=0001-01-01&until=9999-12-31T23:59:59Z", 1},
		{"since=0001-01-01&until=1000-01-01", 0},
		{"since=3000-01-01&until=9999-12-31", 0},
	} {
		r := s.do(t, http.MethodGet, "/v1/usage?"+tc.query, "", auth)
		var rep struct {
			Total struct{ Decisions int64 }
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &rep) != nil {
			t.Fatalf("%s: %s", tc.query, r)
		}
		if rep.Total.Decisions != tc.want {
			t.Errorf("%s: %d decisions; want %d (%s)", tc.query, rep.Total.Decisions, tc.want, r.body)
		}
	}
}
