package openai

import (
	"errors"
	"math"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/engine"
)

// textLabels reads a fuzzed label set: labels separated by '|', matched by
// text as this dialect matches them.
func textLabels(s string) []Label {
	if s == "" {
		return nil
	}
	var out []Label
	for _, l := range strings.Split(s, "|") {
		out = append(out, Label{Text: l, ID: -1})
	}
	return out
}

// FuzzReading feeds a chat completion reply, any bytes, through what
// Engine.Read does with it (decoding as Do does, then Reading) for any
// labels. It must never panic: a reply is either a Malformed failure or a
// reading aligned with the labels whose reported values are
// log-probabilities (not NaN, at most 1e-4), with token counts that are
// not negative, and that the decision core can renormalise without
// panicking into a distribution over the labels.
func FuzzReading(f *testing.F) {
	f.Add([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"A"},`+
		`"logprobs":{"content":[{"token":"A","logprob":-0.4,"bytes":[65],"top_logprobs":[{"token":"A","logprob":-0.4,"bytes":[65]},{"token":"B","logprob":-1.5,"bytes":[66]},{"token":"C","logprob":-2.9,"bytes":[67]}]}]}}],`+
		`"usage":{"prompt_tokens":31,"completion_tokens":1,"total_tokens":32}}`), "A|B|C", false)
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"token":"B","logprob":-0.1,"top_logprobs":[{"token":"B","logprob":-0.1},{"token":"A","logprob":null}]}]}}]}`), "A|B", true)
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"token":"A","logprob":0,"top_logprobs":[{"token":"A","logprob":-0.7},{"token":"A","logprob":-0.7}]}]}}]}`), "A|B", true)
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"token":"A","logprob":0.5,"top_logprobs":[{"token":"A","logprob":0.5}]}]}}]}`), "A", false)
	f.Add([]byte(`{"model":"m","choices":[],"usage":{"prompt_tokens":-3,"completion_tokens":-1}}`), "A|B", false)
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"token":"A","logprob":-0.1,"top_logprobs":[{"token":"A","logprob":-0.1}]}]}}],"usage":{"prompt_tokens":12,"completion_tokens":-1}}`), "A|B", false)
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":null}]}`), "A|B", false)
	f.Add([]byte(`not json`), "", false)
	f.Fuzz(func(t *testing.T, body []byte, labelSet string, preMask bool) {
		labels := textLabels(labelSet)
		var reply ChatResponse
		if Unmarshal(body, &reply) != nil {
			return // Do's Malformed failure
		}
		r, err := Reading(&reply, labels, preMask)
		if err != nil {
			checkFailure(t, err)
			return
		}
		// A constraint that did not hold is read as before it: PreMask
		// then says so, and only then may it differ from what was asked.
		if r.PreMask != (preMask || r.ConstraintFailed) || (r.ConstraintFailed && preMask) || r.Model != reply.Model {
			t.Fatalf("reading %+v for preMask %v, model %q", r, preMask, reply.Model)
		}
		checkReading(t, r, len(labels))
	})
}

func checkFailure(t *testing.T, err error) {
	t.Helper()
	var f *engine.Failure
	if !errors.As(err, &f) || f.Kind != engine.Malformed || f.Err == nil {
		t.Fatalf("error %v is not a Malformed failure", err)
	}
}

// checkReading fails t unless r is a usable reading of n labels.
func checkReading(t *testing.T, r engine.Reading, n int) {
	t.Helper()
	if len(r.Logprobs) != n || len(r.Found) != n {
		t.Fatalf("%d logprobs and %d found for %d labels", len(r.Logprobs), len(r.Found), n)
	}
	for i, v := range r.Logprobs {
		if r.Found[i] && (math.IsNaN(v) || v > 1e-4) {
			t.Fatalf("label %d found with %v, not a log-probability", i, v)
		}
	}
	if r.InputTokens < 0 || r.OutputTokens < 0 || (!r.Counted && (r.InputTokens != 0 || r.OutputTokens != 0)) {
		t.Fatalf("token counts %d, %d (counted %v)", r.InputTokens, r.OutputTokens, r.Counted)
	}
	d, err := decision.FromLogprobs(r.Logprobs, r.Found)
	if err != nil {
		return
	}
	if err := d.Check(n); err != nil {
		t.Fatalf("logprobs %v found %v: %v", r.Logprobs, r.Found, err)
	}
}
