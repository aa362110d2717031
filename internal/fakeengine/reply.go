package fakeengine

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"time"
)

// TokenID is the id the fake's tokenizer gives a piece: 1000 and its
// byte for a one-byte piece, and past every one of those for a
// two-letter piece (Options.PairTokens).
func TokenID(piece string) int {
	if len(piece) == 2 && isUpper(piece[0]) && isUpper(piece[1]) {
		return 2000 + 256*int(piece[0]) + int(piece[1])
	}
	return 1000 + int(piece[0])
}

// filler is the token that holds the mass not on the labels.
const filler = `"`

// entry is one token with its log-probability, in the shape all three
// dialects share; ID is llama.cpp's.
type entry struct {
	ID          *int    `json:"id,omitempty"`
	Token       string  `json:"token"`
	Logprob     any     `json:"logprob"` // a float64, nil, or a literal's placeholder
	TopLogprobs []entry `json:"top_logprobs,omitempty"`
}

// MarshalJSON adds the token's bytes, as the engines do.
func (e entry) MarshalJSON() ([]byte, error) {
	type plain entry
	bs := make([]int, len(e.Token))
	for i := range len(e.Token) {
		bs[i] = int(e.Token[i])
	}
	return json.Marshal(struct {
		plain
		Bytes []int `json:"bytes"`
	}{plain(e), bs})
}

// Non-JSON literals are written as placeholders ("\x00" and the literal)
// and replaced after marshalling, since encoding/json refuses to write them.
var literals = map[Fault]string{NaN: "NaN", PosInf: "Infinity", NegInf: "-Infinity"}

// firstToken is the token an inference request generates, with its top
// log-probabilities as the Behavior has them.
func (f *Fake) firstToken(rec Request, b Behavior) (chosen entry, content []entry) {
	lps := b.logprobs(rec)
	masked := rec.Constrained && !b.IgnoreConstraint
	if masked {
		lps = renormalise(lps)
	}
	var top []entry
	rest := 1.0
	for i, l := range rec.Labels {
		if i >= len(lps) || math.IsInf(lps[i], -1) {
			continue
		}
		rest -= math.Exp(lps[i])
		top = append(top, f.entry(l, lps[i]))
	}
	if rest > 1e-12 && !masked {
		top = append(top, f.entry(filler, math.Log(rest)))
	}
	slices.SortStableFunc(top, func(a, b entry) int { return cmp.Compare(b.Logprob.(float64), a.Logprob.(float64)) })
	if k := rec.TopLogprobs; k > 0 && len(top) > k {
		top = top[:k]
	}
	at := -1 // the entry a per-label fault hits
	if b.Label >= 0 && b.Label < len(rec.Labels) {
		at = slices.IndexFunc(top, func(e entry) bool { return e.Token == rec.Labels[b.Label] })
	}
	// The sampled token is the likeliest label, as under a constraint
	// (unread where none is sent).
	likeliest := func() entry {
		for _, e := range top {
			if e.Token != filler {
				return e
			}
		}
		return f.entry(filler, 0)
	}
	chosen = likeliest()
	if at >= 0 && b.Fault == MissingLabel {
		// Left out before sampling: a label outside the top is not the
		// token generated either, but under llama.cpp's grammar, which
		// samples among the labels whatever their rank.
		top = slices.Delete(top, at, at+1)
		if !rec.Grammar {
			chosen = likeliest()
		}
	}
	if rec.Constrained && b.IgnoreConstraint && len(top) > 0 {
		chosen = top[0] // no mask: the likeliest token of all
	}
	if at >= 0 {
		switch b.Fault {
		case NullLogprob:
			top[at].Logprob = nil
		case NaN, PosInf, NegInf:
			top[at].Logprob = "\x00" + literals[b.Fault]
		case Positive:
			top[at].Logprob = 0.5
		case DuplicateLabel:
			top = slices.Insert(top, at+1, top[at])
		}
	}
	chosen.TopLogprobs = top
	return chosen, []entry{chosen}
}

// completions builds the reply to a /completion prompt list: an entry
// per prompt, in llama-server's shape, each read as answer reads one.
func (f *Fake) completions(recs []Request, b Behavior) []byte {
	out := make([]map[string]any, len(recs))
	for i, rec := range recs {
		chosen, content := f.firstToken(rec, b)
		m := map[string]any{"index": i, "content": chosen.Token, "model": rec.Model, "stop": true,
			"tokens_predicted": 1, "tokens_evaluated": rec.InputTokens}
		if b.Fault != NoLogprobs {
			m["completion_probabilities"] = content
		}
		out[i] = m
	}
	if len(out) == 1 { // llama-server answers a list of one with its entry
		return marshalReply(out[0])
	}
	return marshalReply(out)
}

// answer builds the reply to an inference request.
func (f *Fake) answer(rec Request, b Behavior) []byte {
	chosen, content := f.firstToken(rec, b)
	// Ollama's logprobs are the list OpenAI's hold under "content", and
	// its empty choices an empty list.
	var logprobs any = map[string]any{"content": content}
	if f.opt.Dialect == Ollama {
		logprobs = content
		if b.Fault == EmptyChoices {
			logprobs = []entry{}
		}
	}
	switch b.Fault {
	case NoLogprobs:
		logprobs = nil
	case NullLogprobs:
		logprobs = json.RawMessage("null")
	}
	input := rec.InputTokens
	message := map[string]string{"role": "assistant", "content": chosen.Token}
	if f.opt.Dialect == Ollama {
		m := map[string]any{
			"model":       rec.Model,
			"created_at":  time.Now().UTC().Format(time.RFC3339Nano),
			"message":     message,
			"done":        true,
			"done_reason": "length",
		}
		if logprobs != nil {
			m["logprobs"] = logprobs
		}
		if !b.NoUsage {
			m["prompt_eval_count"], m["eval_count"] = input, 1
		}
		return marshalReply(m)
	}
	choice := map[string]any{"index": 0, "finish_reason": "length", "message": message}
	if logprobs != nil {
		choice["logprobs"] = logprobs
	}
	m := map[string]any{
		"id":      "chatcmpl-fake",
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   rec.Model,
		"choices": []any{choice},
	}
	if b.Fault == EmptyChoices {
		m["choices"] = []any{}
	}
	if !b.NoUsage {
		m["usage"] = map[string]int{"prompt_tokens": input, "completion_tokens": 1, "total_tokens": input + 1}
	}
	return marshalReply(m)
}

// marshalReply writes a reply, with the literals JSON has not.
func marshalReply(reply any) []byte {
	out, err := json.Marshal(reply)
	if err != nil {
		panic(err) // every value above marshals
	}
	for _, lit := range literals {
		out = bytes.ReplaceAll(out, []byte(`"\u0000`+lit+`"`), []byte(lit))
	}
	return out
}

// renormalise makes log-probabilities sum to probability 1, as an engine
// reporting values after its constraint does.
func renormalise(lps []float64) []float64 {
	var sum float64
	for _, v := range lps {
		sum += math.Exp(v)
	}
	out := make([]float64, len(lps))
	for i, v := range lps {
		out[i] = v - math.Log(sum)
	}
	return out
}

func (f *Fake) entry(token string, lp float64) entry {
	e := entry{Token: token, Logprob: lp}
	if f.opt.Dialect == LlamaCpp {
		id := TokenID(token)
		e.ID = &id
	}
	return e
}
