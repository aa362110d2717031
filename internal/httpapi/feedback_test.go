package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// Every id /v1/systemone or /v1/decide accepts and answers is one
// feedback takes: a question id of any length (no limit is documented),
// and a request id of 128 characters however many bytes they take.
func TestFeedbackTakesEveryIDTheServerAccepted(t *testing.T) {
	s, _, _, _ := logServe(t)
	long := strings.Repeat("q", 300)
	r := s.ask(t, `{"model":"fake","state":"s","questions":{"`+long+`":{"type":"noul"}}}`, auth)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	jev := r.header.Get("X-Typesafe-Request-Id")
	wide := strings.Repeat("é", 128) // 256 bytes
	if d := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Urgent?","request_id":"`+wide+`"}`, auth); d.status != http.StatusOK {
		t.Fatal(d)
	}
	for _, body := range []string{
		`{"request_id":"` + jev + `","question":"` + long + `","outcome":true}`,
		`{"request_id":"` + wide + `","outcome":"yes"}`,
	} {
		if got := s.do(t, http.MethodPost, "/v1/feedback", body, auth); got.status != http.StatusOK {
			t.Errorf("%.60s...: %s", body, got)
		}
	}
}

// Feedback on an id in system1's shape but from the future is a 404 at
// once: no replica made it, so there is no writer to wait for (it waited
// out the request timeout, then answered 503).
func TestFeedbackOnAnIDFromTheFutureIs404(t *testing.T) {
	s, _, _, _ := logServe(t)
	for _, body := range []string{
		`{"request_id":"req_ffffffffffffffffffffffffffffffff","outcome":"yes"}`,
		`{"request_id":"req_ffffffffffffffffffffffffffffffff","question":"q","outcome":"yes"}`,
	} {
		if got := s.do(t, http.MethodPost, "/v1/feedback", body, auth); got.status != http.StatusNotFound || !strings.Contains(string(got.body), "unknown request_id") {
			t.Errorf("%s: %s", body, got)
		}
	}
}

// A feedback batch is read as strictly as a single outcome: a key twice
// inside an entry is refused, not read as its last value; an entry's
// problem is named outcomes.N.field even in a batch of one; and text
// that JSON readers would turn into U+FFFD is refused where it is, as
// /v1/systemone refuses it, rather than matched to an id that really is
// U+FFFD.
func TestFeedbackReadsEveryEntryStrictly(t *testing.T) {
	s, dlog, _, _ := logServe(t)
	r := s.ask(t, `{"model":"fake","state":"s","questions":{"c":{"type":"choice","criteria":{"x":null,"y":null}},"\ufffd":{"type":"noul"}}}`, auth)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	id := r.header.Get("X-Typesafe-Request-Id")
	for _, tc := range []struct {
		name, body, param string
		loc               []string
		typ               string
	}{
		{"a key twice in a batch entry", `{"outcomes":[{"request_id":"` + id + `","question":"c","outcome":"x","outcome":"y"}]}`,
			"outcomes.0.outcome", []string{"body", "outcomes", "0", "outcome"}, "duplicate_key"},
		{"a key twice at the top", `{"request_id":"` + id + `","question":"c","outcome":"x","outcome":"y"}`,
			"outcome", []string{"body", "outcome"}, "duplicate_key"},
		{"a bad entry in a batch of one", `{"outcomes":[{"request_id":"` + id + `","question":"c","outcome":"z"}]}`,
			"outcomes.0.outcome", []string{"body", "outcomes", "0", "outcome"}, "value_error"},
		{"an unknown question in a batch of one", `{"outcomes":[{"request_id":"` + id + `","question":"nope","outcome":"x"}]}`,
			"outcomes.0.question", []string{"body", "outcomes", "0", "question"}, "value_error"},
		{"an unpaired surrogate", `{"request_id":"` + id + `","question":"\ud800","outcome":true}`,
			"question", []string{"body", "question"}, "string_unicode"},
		{"an unpaired surrogate in a batch", `{"outcomes":[{"request_id":"` + id + `","question":"c","outcome":"\udc00"}]}`,
			"outcomes.0.outcome", []string{"body", "outcomes", "0", "outcome"}, "string_unicode"},
		{"raw bytes that are not UTF-8", "{\"request_id\":\"" + id + "\",\"question\":\"\xff\",\"outcome\":true}",
			"question", []string{"body", "question"}, "string_unicode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := want422(t, s.do(t, http.MethodPost, "/v1/feedback", tc.body, auth), tc.param, tc.loc...)
			if e.Detail[0].Type != tc.typ {
				t.Errorf("type %q, want %q", e.Detail[0].Type, tc.typ)
			}
		})
	}
	es, err := dlog.Lookup(t.Context(), id)
	if err != nil || len(es) != 2 {
		t.Fatalf("%+v %v", es, err)
	}
	for _, e := range es {
		if e.Outcome != nil {
			t.Errorf("question %q got outcome %+v from a refused call", e.QuestionID, e.Outcome)
		}
	}
	// /v1/systemone refuses the same text.
	want422(t, s.ask(t, `{"model":"fake","state":"s","questions":{"\ud800":{"type":"noul"}}}`, auth), "questions", "body", "questions")
}
