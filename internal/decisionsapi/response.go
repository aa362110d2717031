package decisionsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"system1/internal/decision"
)

// Usage counts tokens for the reply's usage object; counters nobody
// reported are 0, never left out (the SDK's tool runner requires every
// one).
type Usage struct {
	InputTokens      int
	CachedTokens     int
	CacheWriteTokens int
	OutputTokens     int
	ReasoningTokens  int
}

// Response is an answered request, ready to be written.
type Response struct {
	Model string
	// Request is what was asked, as parsed.
	Request *Parsed
	// Dists are the distributions read, unrounded, aligned with the
	// request's questions; a refused question's is not read.
	Dists []decision.Distribution
	// Refused marks, aligned, the questions answered with a refusal; nil
	// when none was.
	Refused []bool
	Usage   Usage
}

// The answer objects, fields in the order OpenAI writes them.
type (
	predicateAnswer struct {
		Type        string  `json:"type"`
		Name        *string `json:"name"`
		Probability float64 `json:"probability"`
	}
	choiceProbability struct {
		Value       json.RawMessage `json:"value"`
		Probability float64         `json:"probability"`
	}
	choiceAnswer struct {
		Type          string              `json:"type"`
		Name          *string             `json:"name"`
		Choice        json.RawMessage     `json:"choice"`
		Confidence    float64             `json:"confidence"`
		Probabilities []choiceProbability `json:"probabilities"`
	}
	scoreProbability struct {
		Value       int     `json:"value"`
		Label       string  `json:"label"`
		Probability float64 `json:"probability"`
	}
	scoreAnswer struct {
		Type          string             `json:"type"`
		Name          *string            `json:"name"`
		Score         float64            `json:"score"`
		Confidence    float64            `json:"confidence"`
		Probabilities []scoreProbability `json:"probabilities"`
	}
	refusalAnswer struct {
		Type string  `json:"type"`
		Name *string `json:"name"`
	}
	wireUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens     int `json:"cached_tokens"`
			CacheWriteTokens int `json:"cache_write_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	wireResponse struct {
		Model   string    `json:"model"`
		Answers []any     `json:"answers"`
		Usage   wireUsage `json:"usage"`
	}
)

// AppendJSON writes the response body: answers in question order, each
// with the question's name (null when unnamed). A choice lists every
// value, typed as asked, in request order, and chooses the argmax of what
// it prints; a score lists every level with its index and label. The
// numbers are decision.NewAnswer's at Places decimals: probabilities
// rounded by largest remainder, the score and the confidences (the Jev
// wire's formulas) computed on the unrounded distribution. A distribution
// that is missing or not a distribution is an error: no answer is made up.
func (r *Response) AppendJSON(b []byte) ([]byte, error) {
	p := r.Request
	if p == nil || len(r.Dists) != len(p.Questions) || len(p.Asked) != len(p.Questions) ||
		(r.Refused != nil && len(r.Refused) != len(p.Questions)) {
		return b, errors.New("decisionsapi: a response's distributions do not match its questions")
	}
	out := wireResponse{Model: r.Model, Answers: make([]any, len(p.Questions))}
	for i, q := range p.Questions {
		var name *string
		if p.Asked[i].Named {
			name = &p.Asked[i].Name
		}
		if r.Refused != nil && r.Refused[i] {
			out.Answers[i] = refusalAnswer{Type: "refusal", Name: name}
			continue
		}
		a, err := decision.NewAnswer(q, r.Dists[i], Places)
		if err != nil {
			return b, err
		}
		switch q.Kind {
		case decision.Noul:
			out.Answers[i] = predicateAnswer{Type: "predicate", Name: name, Probability: a.Noul}
		case decision.Choice:
			ans := choiceAnswer{Type: "choice", Name: name, Confidence: a.Confidence, Probabilities: make([]choiceProbability, len(q.Options))}
			for j, o := range q.Options {
				ans.Probabilities[j] = choiceProbability{Value: p.Asked[i].Values[j], Probability: a.Probabilities[j]}
				if o.Key == a.Choice {
					ans.Choice = p.Asked[i].Values[j]
				}
			}
			out.Answers[i] = ans
		case decision.Score:
			ans := scoreAnswer{Type: "score", Name: name, Score: consistentScore(a), Confidence: a.Confidence, Probabilities: make([]scoreProbability, len(q.Options))}
			for j := range q.Options {
				ans.Probabilities[j] = scoreProbability{Value: j, Label: p.Asked[i].Labels[j], Probability: a.Probabilities[j]}
			}
			out.Answers[i] = ans
		default:
			return b, fmt.Errorf("decisionsapi: question %d has no kind", i)
		}
	}
	u := r.Usage
	out.Usage.InputTokens = max(u.InputTokens, 0)
	out.Usage.InputTokensDetails.CachedTokens = max(u.CachedTokens, 0)
	out.Usage.InputTokensDetails.CacheWriteTokens = max(u.CacheWriteTokens, 0)
	out.Usage.OutputTokens = max(u.OutputTokens, 0)
	out.Usage.OutputTokensDetails.ReasoningTokens = max(u.ReasoningTokens, 0)
	out.Usage.TotalTokens = out.Usage.InputTokens + out.Usage.OutputTokens
	return appendJSON(b, out), nil
}

// consistentScore is the answer's score, unless the rounded probabilities
// stray so far from the unrounded ones that a client, which checks the
// score against the mean of what it is shown, would refuse it: then it is
// that mean. Largest-remainder rounding can move the printed mean of k
// levels by up to k²/8 hundredths (all remainders equal, the units given
// to the low levels), beyond promptfoo's (k-1) hundredths from k = 7.
func consistentScore(a decision.Answer) float64 {
	k := len(a.Probabilities)
	var mean float64
	for i, p := range a.Probabilities {
		mean += float64(i) * p
	}
	// promptfoo allows 0.01 per level step; the AI SDK 0.005 per unit of
	// the index sum, plus 0.005 for the score's own rounding.
	allowed := min(0.01*float64(k-1), 0.005*float64(k*(k-1)/2)+0.005)
	// Both sides are whole hundredths, so the slack only absorbs float
	// noise.
	if math.Abs(a.Score-mean) <= allowed+1e-9 {
		return a.Score
	}
	return math.Round(mean*100) / 100
}
