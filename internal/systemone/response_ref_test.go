package systemone

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// parseResponseRef is ParseResponse as it was before it read the reply in
// one pass: encoding/json into maps and pointers, then the checks. It is
// the reference FuzzParseResponseAsBefore holds ParseResponse to.
func parseResponseRef(req decision.Request, body []byte) (*Reply, error) {
	var top struct {
		Model   *string                   `json:"model"`
		Answers map[string]*refWireAnswer `json:"answers"`
		Usage   *struct {
			Input  json.RawMessage `json:"input_tokens"`
			Output json.RawMessage `json:"output_tokens"`
		} `json:"usage"`
	}
	if k := jsonx.Kind(body); k != "object" {
		return nil, fmt.Errorf("body: a JSON object is required, got %s", k)
	}
	// One decoding pass; a field of the wrong JSON type (a number as a
	// string, an answer that is not an object) fails it.
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if top.Model == nil || *top.Model == "" {
		return nil, errors.New("model: a non-empty string is required")
	}
	if top.Answers == nil {
		return nil, errors.New("answers: an object is required")
	}
	if top.Usage == nil {
		return nil, errors.New("usage: an object is required")
	}
	n := len(req.Questions)
	r := &Reply{Model: *top.Model, Answers: make([]decision.Answer, 0, n), Dists: make([]decision.Distribution, 0, n), Abstained: make([]string, 0, n)}
	var err error
	if r.Usage.InputTokens, err = tokenCount(top.Usage.Input); err != nil {
		return nil, fmt.Errorf("usage.input_tokens: %w", err)
	}
	if r.Usage.OutputTokens, err = tokenCount(top.Usage.Output); err != nil {
		return nil, fmt.Errorf("usage.output_tokens: %w", err)
	}
	asked := make(map[string]bool, n)
	for _, q := range req.Questions {
		asked[q.ID] = true
		wa, ok := top.Answers[q.ID]
		if !ok || wa == nil {
			return nil, fmt.Errorf("answers.%s: missing", q.ID)
		}
		a, d, err := refParseAnswer(q, wa)
		if err != nil {
			return nil, fmt.Errorf("answers.%s: %w", q.ID, err)
		}
		r.Answers = append(r.Answers, a)
		r.Dists = append(r.Dists, d)
		r.Abstained = append(r.Abstained, abstained(wa.Abstention, wa.LowConfidence, wa.Threshold))
	}
	for id := range top.Answers {
		if !asked[id] {
			return nil, fmt.Errorf("answers.%s: an answer to a question that was not asked", id)
		}
	}
	return r, nil
}

// refWireAnswer is one answer as the wire carries it.
type refWireAnswer struct {
	Type          string                     `json:"type"`
	Choice        *string                    `json:"choice"`
	Noul          *float64                   `json:"noul"`
	Score         *float64                   `json:"score"`
	Confidence    *float64                   `json:"confidence"`
	Legend        map[string]json.RawMessage `json:"legend"`
	Probabilities map[string]float64         `json:"probabilities"`
	// laya-serve's abstention gate; other endpoints send neither. They are
	// read leniently: a mark of another type is no mark.
	Abstention    json.RawMessage `json:"abstention"`
	LowConfidence json.RawMessage `json:"low_confidence"`
	Threshold     json.RawMessage `json:"abstention_threshold"`
}

func refParseAnswer(q decision.Question, a *refWireAnswer) (decision.Answer, decision.Distribution, error) {
	if a.Type != string(q.Kind) {
		return decision.Answer{}, nil, fmt.Errorf("type %q, asked %q", a.Type, q.Kind)
	}
	out := decision.Answer{Kind: q.Kind}
	switch q.Kind {
	case decision.Noul:
		if a.Noul == nil || !unit(*a.Noul) {
			return out, nil, errors.New("noul: a number in [0,1] is required")
		}
		out.Noul = *a.Noul
		return out, decision.Distribution{*a.Noul, 1 - *a.Noul}, nil
	case decision.Choice:
		if a.Choice == nil {
			return out, nil, errors.New("choice: a string is required")
		}
		out.Choice = *a.Choice
		if q.OptionIndex(*a.Choice) < 0 {
			return out, nil, fmt.Errorf("choice %q is not one of the options", *a.Choice)
		}
	case decision.Score:
		if a.Score == nil || math.IsNaN(*a.Score) || *a.Score < 0 || *a.Score > float64(len(q.Options)-1) {
			return out, nil, fmt.Errorf("score: a number in [0, %d] is required", len(q.Options)-1)
		}
		out.Score = *a.Score
		if len(a.Legend) != len(q.Options) {
			return out, nil, fmt.Errorf("legend: %d levels, asked %d", len(a.Legend), len(q.Options))
		}
		for _, o := range q.Options {
			if _, ok := a.Legend[o.Key]; !ok {
				return out, nil, fmt.Errorf("legend: level %s missing", o.Key)
			}
		}
	}
	if a.Confidence == nil || !unit(*a.Confidence) {
		return out, nil, errors.New("confidence: a number in [0,1] is required")
	}
	out.Confidence = *a.Confidence
	if len(a.Probabilities) != len(q.Options) {
		return out, nil, fmt.Errorf("probabilities: %d keys for %d options", len(a.Probabilities), len(q.Options))
	}
	d := make(decision.Distribution, len(q.Options))
	var sum, top float64
	for i, o := range q.Options {
		p, ok := a.Probabilities[o.Key]
		if !ok {
			return out, nil, fmt.Errorf("probabilities: %q missing", o.Key)
		}
		if !unit(p) {
			return out, nil, fmt.Errorf("probabilities.%s: %v is not in [0,1]", o.Key, p)
		}
		d[i] = p
		sum += p
		top = math.Max(top, p)
	}
	// promptfoo's tolerance, the tightest of the clients.
	if tol := math.Max(1e-4, float64(len(d))*5e-7); math.Abs(sum-1) > tol {
		return out, nil, fmt.Errorf("probabilities sum to %v", sum)
	}
	if q.Kind == decision.Choice && d[q.OptionIndex(out.Choice)] < top {
		return out, nil, fmt.Errorf("choice %q is not an argmax of the probabilities", out.Choice)
	}
	out.Probabilities = append([]float64(nil), d...)
	// Rounded values may sum to 1 within the tolerance only; the
	// distribution itself must sum to 1.
	for i := range d {
		d[i] /= sum
	}
	return out, d, nil
}
