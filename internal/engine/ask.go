package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"system1/internal/decision"
)

// Candidate labels, in order of preference. Single capital letters and
// digits are one token in every tokenizer we know of, and neither set
// holds a label that is a prefix of another, which a grammar needs.
var (
	letters = splitChars("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	digits  = splitChars("0123456789")
)

func splitChars(s string) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}

// Candidates returns the labels to try for a question: letters for the
// options of a choice and the two sides of a noul (neutral labels, not the
// words yes and no), digits for score levels, which read as the levels
// they are.
func Candidates(q decision.Question) []string {
	if q.Kind == decision.Score {
		return digits
	}
	return letters
}

// Outcome is one question answered by one engine.
type Outcome struct {
	Dist decision.Distribution
	// Mass is the raw probability the engine gave the labels, on pre-mask
	// engines; NaN where the engine only reports post-mask values.
	Mass float64
	// Missing are the keys of options whose label the engine did not
	// report; they were given probability 0, which is only a bound.
	Missing []string
	Model   string
	// Usage as the engine counted it, or estimated (4 characters a token)
	// when it reported none.
	InputTokens, OutputTokens int
	Estimated                 bool
}

// Ask answers question q about state on engine e, serving model.
func Ask(ctx context.Context, e Engine, model string, state json.RawMessage, q decision.Question) (Outcome, error) {
	cand := Candidates(q)
	if len(q.Options) > len(cand) {
		return Outcome{}, &Failure{Kind: Rejected, Err: fmt.Errorf("%d options; this node labels at most %d", len(q.Options), len(cand))}
	}
	labels, err := e.Labels(ctx, model, cand[:len(q.Options)])
	if err != nil {
		return Outcome{}, err
	}
	if len(labels) < len(q.Options) {
		return Outcome{}, &Failure{Kind: Rejected, Err: fmt.Errorf("model %s has only %d single-token labels for %d options", model, len(labels), len(q.Options))}
	}
	p := Layout(state, q, labels[:len(q.Options)])
	r, err := e.Read(ctx, model, p)
	if err != nil {
		return Outcome{}, err
	}
	if len(r.Logprobs) != len(p.Labels) || len(r.Found) != len(p.Labels) {
		return Outcome{}, &Failure{Kind: Malformed, Err: fmt.Errorf("reading has %d values for %d labels", len(r.Logprobs), len(p.Labels))}
	}
	d, err := decision.FromLogprobs(r.Logprobs, r.Found)
	if err != nil {
		return Outcome{}, &Failure{Kind: Malformed, Err: err}
	}
	out := Outcome{Dist: d, Mass: math.NaN(), Model: r.Model}
	if r.PreMask {
		out.Mass = decision.Mass(r.Logprobs, r.Found)
	}
	for i, ok := range r.Found {
		if !ok {
			out.Missing = append(out.Missing, q.Options[i].Key)
		}
	}
	if out.Model == "" {
		out.Model = model
	}
	out.InputTokens, out.OutputTokens = r.InputTokens, r.OutputTokens
	if !r.Counted {
		out.InputTokens = (len(p.System) + len(p.User()) + 3) / 4
		out.OutputTokens = 1
		out.Estimated = true
	}
	return out, nil
}
