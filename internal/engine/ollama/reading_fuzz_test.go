package ollama

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/engine"
)

// replay answers every request in memory with one 200 body: the reply
// goes through Engine.Read's own decoding without a socket.
type replay []byte

func (b replay) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       req,
	}, nil
}

// FuzzReading feeds Engine.Read any /api/chat reply body, for any labels
// (separated by '|'), through an in-memory transport. It must never panic:
// a reply is either a Malformed failure or a reading aligned with the
// labels whose reported values are log-probabilities (not NaN, at most
// 1e-4), with token counts that are not negative, and that the decision
// core can renormalise without panicking.
func FuzzReading(f *testing.F) {
	chat, err := os.ReadFile(filepath.Join("testdata", "chat.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(chat, "A|B|C")
	f.Add(chat, "A|B|Z")
	f.Add([]byte(`{"model":"tiny","message":{"role":"assistant","content":"A"},"done":true,"logprobs":[{"token":"A","logprob":-0.5,"bytes":[65],"top_logprobs":[`+
		`{"token":"A","logprob":-1.3862943611198906},{"token":"A","logprob":-1.3862943611198906},{"token":"B","logprob":-2}]}],"prompt_eval_count":12,"eval_count":1}`), "A|B|C")
	f.Add([]byte(`{"model":"tiny","logprobs":[{"token":"A","logprob":-1,"top_logprobs":[{"token":"A","logprob":null}]}]}`), "A|B")
	f.Add([]byte(`{"model":"tiny","logprobs":[{"token":"A","logprob":-1,"top_logprobs":[{"token":"A","logprob":-1}]}],"prompt_eval_count":-4,"eval_count":-1}`), "A|B")
	f.Add([]byte(`{"model":"tiny","logprobs":[{"token":"A","logprob":-1,"top_logprobs":[{"token":"A","logprob":-1}]}],"prompt_eval_count":30,"eval_count":-1}`), "A|B")
	f.Add([]byte(`{"model":"tiny","logprobs":[],"done":true,"done_reason":"stop"}`), "A|B")
	f.Add([]byte(`{"model":"tiny","message":{"role":"assistant","content":"A"},"done":true}`), "A|B")
	f.Fuzz(func(t *testing.T, body []byte, labelSet string) {
		var labels []string
		if labelSet != "" {
			labels = strings.Split(labelSet, "|")
		}
		e := &Engine{BaseURL: "http://ollama.invalid", HTTP: &http.Client{Transport: replay(body)}}
		r, err := e.Read(context.Background(), "tiny", engine.Prompt{System: "s", StatePart: "state", Question: "q", Labels: labels})
		if err != nil {
			var f *engine.Failure
			if !errors.As(err, &f) || f.Kind != engine.Malformed {
				t.Fatalf("error %v is not a Malformed failure", err)
			}
			return
		}
		if len(r.Logprobs) != len(labels) || len(r.Found) != len(labels) || !r.PreMask {
			t.Fatalf("reading %+v for %d labels", r, len(labels))
		}
		for i, v := range r.Logprobs {
			if r.Found[i] && (math.IsNaN(v) || v > 1e-4) {
				t.Fatalf("label %q found with %v, not a log-probability", labels[i], v)
			}
		}
		if r.InputTokens < 0 || r.OutputTokens < 0 || (!r.Counted && (r.InputTokens != 0 || r.OutputTokens != 0)) {
			t.Fatalf("token counts %d, %d (counted %v)", r.InputTokens, r.OutputTokens, r.Counted)
		}
		if d, err := decision.FromLogprobs(r.Logprobs, r.Found); err == nil {
			if err := d.Check(len(labels)); err != nil {
				t.Fatalf("logprobs %v found %v: %v", r.Logprobs, r.Found, err)
			}
		}
	})
}
