package llamacpp

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/engine/openai"
)

// idLabels reads a fuzzed label set: one label per byte, with the id the
// fake engine's tokenizer gives that one-byte piece (1000 + the byte).
func idLabels(b []byte) []openai.Label {
	out := make([]openai.Label, len(b))
	for i, c := range b {
		out[i] = openai.Label{Text: string([]byte{c}), ID: 1000 + int(c)}
	}
	return out
}

// FuzzReading feeds a llama-server chat reply, any bytes, through what
// Engine.read does with it (decoding as openai.Post does, openai.Reading with
// labels matched by token id, the floor and the second-call test). It must
// never panic, and a reading it accepts must match labels by id exactly:
// a label whose id appears twice among the alternatives fails the reading;
// one that appears once has that entry's value, whatever its text; one
// that does not appear is found only as the generated token itself. Every
// value found is a log-probability, and the counts are not negative.
func FuzzReading(f *testing.F) {
	f.Add([]byte(`{"choices":[{"finish_reason":"length","index":0,"message":{"role":"assistant","content":"A"},`+
		`"logprobs":{"content":[{"id":1065,"token":"A","bytes":[65],"logprob":-1.0,"top_logprobs":[`+
		`{"id":1034,"token":"\"","bytes":[34],"logprob":-0.6},{"id":1065,"token":"A","bytes":[65],"logprob":-1.0},`+
		`{"id":1066,"token":"B","bytes":[66],"logprob":-2.5},{"id":1067,"token":"C","bytes":[67],"logprob":-4.1}]}]}}],`+
		`"created":1764525766,"model":"stories260k","system_fingerprint":"b1-80fb11a","object":"chat.completion",`+
		`"usage":{"completion_tokens":1,"prompt_tokens":57,"total_tokens":58,"prompt_tokens_details":{"cached_tokens":40}},`+
		`"id":"chatcmpl-x","timings":{"cache_n":40,"prompt_n":17,"prompt_ms":3.2,"predicted_n":1,"predicted_ms":0.4}}`), []byte("ABC"))
	// The duplicate-label fault: one id twice.
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"id":1065,"token":"A","logprob":-0.5,"top_logprobs":[`+
		`{"id":1065,"token":"A","logprob":-0.5},{"id":1065,"token":"A","logprob":-0.5},{"id":1066,"token":"B","logprob":-1.5}]}]}}]}`), []byte("AB"))
	// The label's text under another id (a byte-fallback token), and the
	// label's id under another text.
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"id":1066,"token":"B","logprob":-0.3,"top_logprobs":[`+
		`{"id":7,"token":"A","logprob":-1.2},{"id":1066,"token":"x","logprob":-0.3}]}]}}]}`), []byte("AB"))
	// A label below the top, reported only as the generated token.
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"id":1067,"token":"C","logprob":-9.5,"top_logprobs":[`+
		`{"id":1065,"token":"A","logprob":-0.1}]}]}}]}`), []byte("ABC"))
	// null is how llama-server writes NaN.
	f.Add([]byte(`{"model":"m","choices":[{"logprobs":{"content":[{"id":1065,"token":"A","logprob":null,"top_logprobs":[`+
		`{"id":1065,"token":"A","logprob":null}]}]}}]}`), []byte("A"))
	f.Add([]byte(`{"model":"m","choices":[]}`), []byte("AB"))
	f.Fuzz(func(t *testing.T, body, labelBytes []byte) {
		labels := idLabels(labelBytes)
		var reply openai.ChatResponse
		if openai.Unmarshal(body, &reply) != nil {
			return // Do's Malformed failure
		}
		r, err := openai.Reading(&reply, labels, true)
		if err != nil {
			var f *engine.Failure
			if !errors.As(err, &f) || f.Kind != engine.Malformed {
				t.Fatalf("error %v is not a Malformed failure", err)
			}
			return
		}
		tok, err := reply.FirstToken()
		if err != nil {
			t.Fatalf("a reading of a reply without a first token: %v", err)
		}
		_ = worthAgain(r, openai.Floor(tok, firstK))

		if len(r.Logprobs) != len(labels) || len(r.Found) != len(labels) || !r.PreMask {
			t.Fatalf("reading %+v for %d labels", r, len(labels))
		}
		for i, l := range labels {
			var at []int
			for j, e := range tok.TopLogprobs {
				if e.ID != nil && *e.ID == l.ID {
					at = append(at, j)
				}
			}
			switch {
			case len(at) > 1:
				t.Fatalf("label %q: id %d appears %d times, and the reading was accepted", l.Text, l.ID, len(at))
			case len(at) == 1:
				if !r.Found[i] || r.Logprobs[i] != *tok.TopLogprobs[at[0]].Logprob {
					t.Fatalf("label %q: found %v at %v, want the entry's %v", l.Text, r.Found[i], r.Logprobs[i], *tok.TopLogprobs[at[0]].Logprob)
				}
			default:
				self := tok.ID != nil && *tok.ID == l.ID && tok.Logprob != nil && !math.IsNaN(*tok.Logprob)
				if r.Found[i] != self || self && r.Logprobs[i] != *tok.Logprob {
					t.Fatalf("label %q: found %v at %v; generated token %+v", l.Text, r.Found[i], r.Logprobs[i], tok)
				}
			}
			if r.Found[i] && (math.IsNaN(r.Logprobs[i]) || r.Logprobs[i] > 1e-4) {
				t.Fatalf("label %q found with %v, not a log-probability", l.Text, r.Logprobs[i])
			}
		}
		if r.InputTokens < 0 || r.OutputTokens < 0 {
			t.Fatalf("token counts %d, %d", r.InputTokens, r.OutputTokens)
		}
		if d, err := decision.FromLogprobs(r.Logprobs, r.Found); err == nil {
			if err := d.Check(len(labels)); err != nil {
				t.Fatalf("logprobs %v found %v: %v", r.Logprobs, r.Found, err)
			}
		}
	})
}

// FuzzCompletionList feeds llama-server's reply to a /completion call of n
// prompts, any bytes, through what a call of prompts together does with
// it: byIndex, then each entry's first token read as openai.TokenReading
// reads it and its token counts kept. It must never panic and fail only
// as Malformed. A reply it accepts has each prompt's entry once, at the
// prompt's index, each with a first token; a reading it accepts has a
// log-probability for each label it found and counts that are not
// negative.
func FuzzCompletionList(f *testing.F) {
	entry := func(index int, logprob string) string {
		return `{"index":` + fmt.Sprint(index) + `,"model":"stories260k","tokens_evaluated":57,"tokens_predicted":1,"completion_probabilities":[` +
			`{"id":1065,"token":"A","logprob":` + logprob + `,"top_logprobs":[{"id":1065,"token":"A","logprob":` + logprob + `},{"id":1066,"token":"B","logprob":-2.5}]}]}`
	}
	f.Add([]byte(`[`+entry(1, "-0.2")+`,`+entry(0, "-1.0")+`]`), uint8(2), []byte("AB"))
	f.Add([]byte(entry(0, "-0.2")), uint8(1), []byte("AB")) // a list of one is answered as its entry
	f.Add([]byte(`[`+entry(0, "-0.2")+`,`+entry(0, "-1.0")+`]`), uint8(2), []byte("AB"))
	f.Add([]byte(`[`+entry(2, "-0.2")+`,`+entry(0, "-1.0")+`]`), uint8(2), []byte("AB"))
	f.Add([]byte(`[`+entry(0, "null")+`]`), uint8(1), []byte("A"))
	f.Add([]byte(`[{"index":0,"tokens_evaluated":-5,"tokens_predicted":-1,"completion_probabilities":[{"id":1065,"token":"A","logprob":-0.1}]}]`), uint8(1), []byte("A"))
	f.Add([]byte(`[{"index":0,"completion_probabilities":[]}]`), uint8(1), []byte("A"))
	f.Fuzz(func(t *testing.T, body []byte, n uint8, labelBytes []byte) {
		labels := idLabels(labelBytes)
		malformed := func(err error) {
			t.Helper()
			var f *engine.Failure
			if !errors.As(err, &f) || f.Kind != engine.Malformed {
				t.Fatalf("error %v is not a Malformed failure", err)
			}
		}
		entries, err := byIndex(body, int(n))
		if err != nil {
			malformed(err)
			return
		}
		if len(entries) != int(n) {
			t.Fatalf("%d entries for %d prompts", len(entries), n)
		}
		for i, c := range entries {
			if c == nil || c.Index != i || len(c.Probabilities) == 0 {
				t.Fatalf("prompt %d's entry: %+v", i, c)
			}
			r, err := openai.TokenReading(&c.Probabilities[0], labels, true)
			if err != nil {
				malformed(err)
				continue
			}
			r.SetCounts(c.TokensEvaluated, c.TokensPredicted)
			if len(r.Logprobs) != len(labels) || len(r.Found) != len(labels) {
				t.Fatalf("reading %+v for %d labels", r, len(labels))
			}
			for j := range labels {
				if r.Found[j] && (math.IsNaN(r.Logprobs[j]) || r.Logprobs[j] > 1e-4) {
					t.Fatalf("label %q found with %v, not a log-probability", labels[j].Text, r.Logprobs[j])
				}
			}
			if r.InputTokens < 0 || r.OutputTokens < 0 {
				t.Fatalf("token counts %d, %d", r.InputTokens, r.OutputTokens)
			}
		}
	})
}
