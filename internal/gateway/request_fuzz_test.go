package gateway

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"system1/internal/decisionlog"
)

// FuzzParseRequest feeds the decide request parser any bytes. It must never
// panic; every problem it reports names the field it is about (or the
// request as a whole); a request it accepts keeps every limit of the
// contract and, written back out, is valid against the published schema;
// and any request, good or bad, yields a usable request id to echo.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"question":"Ship it?"}`,
		`{"question":"Which?","options":["a","b"],"context":{"k":1},"min_confidence":0.7,"request_id":"r1","schema_version":"1"}`,
		`{"question":"Which?","options":null,"context":null,"min_confidence":null,"request_id":null,"schema_version":null}`,
		`{"question":"q","options":["a","a",""],"min_confidence":1.5,"request_id":"","bogus":1}`,
		`{"question":"q","options":"a,b","context":"text","min_confidence":"high","request_id":7,"schema_version":2}`,
		`{"question":"q","min_confidence":-0,"request_id":"\u00e9\ud83d\ude00"}`,
		`{"question":"q","min_confidence":1e400}`,
		``, `[1]`, `null`, `{}`, `{"question":"  "}`,
	} {
		f.Add([]byte(s))
	}
	resolved, err := RequestSchema().Resolve(nil)
	if err != nil {
		f.Fatal(err)
	}
	known := []string{"question", "options", "context", "min_confidence", "request_id", "schema_version"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, ps := ParseRequest(raw)

		id := requestID(raw, "")
		if n := utf8.RuneCountInString(id); id == "" || n > decisionlog.MaxRequestIDChars {
			t.Fatalf("request id %q", id)
		}
		if len(ps) > 0 {
			for _, p := range ps {
				field, _, _ := strings.Cut(p, " ")
				field, _, _ = strings.Cut(field, "[")
				if !slices.Contains(known, field) && !strings.HasPrefix(p, "the request ") && !strings.HasPrefix(p, "unknown field(s) ") {
					t.Fatalf("problem %q names no field", p)
				}
			}
			return
		}

		if n := utf8.RuneCountInString(req.Question); strings.TrimSpace(req.Question) == "" || n > MaxQuestionChars {
			t.Fatalf("accepted a question of %d characters: %q", n, req.Question)
		}
		if req.Options != nil {
			if n := len(req.Options); n < MinOptions || n > MaxOptions {
				t.Fatalf("accepted %d options", n)
			}
			seen := map[string]bool{}
			for _, o := range req.Options {
				if strings.TrimSpace(o) == "" || utf8.RuneCountInString(o) > MaxOptionChars || seen[o] {
					t.Fatalf("accepted option %q of %q", o, req.Options)
				}
				seen[o] = true
			}
		}
		if c := req.MinConfidence; c != nil && (math.IsNaN(*c) || *c < 0 || *c > 1) {
			t.Fatalf("accepted min_confidence %v", *c)
		}
		if req.RequestID != "" && req.RequestID != id {
			t.Fatalf("request_id %q is echoed as %q", req.RequestID, id)
		}
		if utf8.RuneCountInString(req.RequestID) > decisionlog.MaxRequestIDChars {
			t.Fatalf("accepted request_id %q", req.RequestID)
		}
		if req.Context != nil && (!json.Valid(req.Context) || req.Context[0] != '{' || len(req.Context) > MaxContextBytes) {
			t.Fatalf("accepted context %s", req.Context)
		}
		if req.SchemaVersion != "" && req.SchemaVersion != SchemaVersion {
			t.Fatalf("accepted schema_version %q", req.SchemaVersion)
		}

		// The request as understood is one the published contract allows.
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(generic); err != nil {
			t.Fatalf("accepted request fails the published schema: %v\n%s", err, b)
		}
		again, ps := ParseRequest(b)
		if len(ps) > 0 {
			t.Fatalf("accepted request, written back out, fails: %q\n%s", ps, b)
		}
		if again.Question != req.Question || !slices.Equal(again.Options, req.Options) || again.RequestID != req.RequestID {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", req, again)
		}
	})
}
