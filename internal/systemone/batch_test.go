package systemone

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The batch body is laya-serve's: the states in order, the questions as
// /v1/systemone sends them, and no "state".
func TestAppendBatchRequest(t *testing.T) {
	req := sampleRequest(t)
	states := []json.RawMessage{json.RawMessage(`"a"`), json.RawMessage(`{"body":"b"}`)}
	b := AppendBatchRequest(nil, req, states)
	var got struct {
		Model     string                     `json:"model"`
		States    []json.RawMessage          `json:"states"`
		State     json.RawMessage            `json:"state"`
		Questions map[string]json.RawMessage `json:"questions"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if got.Model != "jev-latest" || len(got.States) != 2 || string(got.States[1]) != `{"body":"b"}` || got.State != nil || len(got.Questions) != 3 {
		t.Fatalf("%s", b)
	}
	// The questions are those of the single request, byte for byte.
	single := string(AppendRequest(nil, req))
	q := single[strings.Index(single, `,"questions":`):]
	if !strings.HasSuffix(string(b), q) {
		t.Fatalf("batch questions differ:\n%s\n%s", b, single)
	}
}

func TestParseBatchResponse(t *testing.T) {
	req := sampleRequest(t)
	good := `{"model":"m","answers":{"urgent":{"type":"noul","noul":0.5},` +
		`"dept":{"type":"choice","choice":"billing","confidence":0.5,"probabilities":{"billing":0.6,"technical":0.3,"sales":0.1}},` +
		`"mood":{"type":"score","score":1,"confidence":0.5,"legend":{"0":"Calm","1":{"x":1},"2":"Very angry"},"probabilities":{"0":0.1,"1":0.8,"2":0.1}}},` +
		`"usage":{"input_tokens":3,"output_tokens":0}}`
	bad := `{"model":"m","answers":{},"usage":{}}`
	for _, tc := range []struct {
		name, body string
		n          int
		whole      bool   // the whole reply is refused
		rowErr     []bool // else which results are
	}{
		{"two good", `{"results":[` + good + `,` + good + `],"total_usage":{}}`, 2, false, []bool{false, false}},
		{"one bad", `{"results":[` + good + `,` + bad + `]}`, 2, false, []bool{false, true}},
		{"short", `{"results":[` + good + `]}`, 2, true, nil},
		{"no results", `{"answers":{}}`, 1, true, nil},
		{"not an object", `[1]`, 1, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replies, errs, err := ParseBatchResponse(req, tc.n, []byte(tc.body))
			if (err != nil) != tc.whole {
				t.Fatalf("err %v", err)
			}
			for i, want := range tc.rowErr {
				if (errs[i] != nil) != want || (replies[i] == nil) != want {
					t.Errorf("result %d: reply %v, err %v", i, replies[i], errs[i])
				}
				if errs[i] != nil && !errors.Is(errs[i], ErrMalformed) {
					t.Errorf("result %d: %v does not wrap ErrMalformed", i, errs[i])
				}
			}
		})
	}
}

// AskBatch posts to the endpoint's /batch route and reports a 404 as the
// StatusError a caller falls back on.
func TestAskBatch(t *testing.T) {
	req := sampleRequest(t)
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"states":["x"]`) {
			t.Errorf("body %s", body)
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(NotFoundBody)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/v1/systemone"}
	_, _, err := c.AskBatch(context.Background(), req, []json.RawMessage{json.RawMessage(`"x"`)})
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusNotFound {
		t.Fatalf("err %v", err)
	}
	if path != "/v1/systemone/batch" {
		t.Fatalf("path %s", path)
	}
}
