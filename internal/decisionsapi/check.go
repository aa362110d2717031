package decisionsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// Reply is a Decisions reply read back: per question, the answer as
// reported and the distribution it carries, or a refusal.
type Reply struct {
	Model string
	Usage Usage
	// Answers are aligned with the request's questions; a refused
	// question's is the zero Answer.
	Answers []decision.Answer
	// Dists are aligned too, in option order, nil for a refused question;
	// a noul's is [P(true), P(false)].
	Dists []decision.Distribution
	// Refused marks the questions the endpoint declined to answer. A
	// refusal is the endpoint's answer, never an error and never given a
	// distribution.
	Refused []bool
}

// The clients' tolerances (docs/decisions-wire.md, "What clients check").
const (
	// promptfoo: a distribution sums to 1 within one percentage point, and
	// a score is within one hundredth per level step of the mean. What
	// system1's own replies are held to (CheckResponse).
	promptfooTolerance = 0.01 + 1e-12
	// The AI SDK: 1e-6, plus half a unit of the declared two decimals per
	// reported number. What an endpoint's replies are read with.
	aiSDKTolerance = 1e-6
	aiSDKRounding  = 0.005
)

// ParseResponse reads a Decisions reply to req, as AppendRequest sent it,
// as the official clients read one: OpenAI's tool runner (every usage
// counter an integer, a string choice), the AI SDK's schema and
// validate-decision (names equal to the questions', string values, each
// value once, sums, argmax and score within the declared rounding of two
// decimals, n x 0.005 for n numbers), and promptfoo's structure (answers
// in order, labels as sent, confidence in [0,1], a non-empty model). A
// reply that fails them is an error, never passed on; one within them is
// read, its distributions renormalised to sum to 1, since an endpoint that
// rounds each number on its own is what the clients accept. An answer
// that fails is an *AnswerError.
func ParseResponse(req decision.Request, body []byte) (*Reply, error) {
	return parseResponse(req, body, false)
}

// CheckResponse holds a reply to every check of ParseResponse and to
// promptfoo's tighter sums and scores (within 0.01) as well: what
// system1's own replies must pass, so that no client refuses them.
func CheckResponse(req decision.Request, body []byte) error {
	_, err := parseResponse(req, body, true)
	return err
}

// AnswerError is a reply whose answer to one question fails the checks:
// a shape that question may have provoked, not a broken endpoint.
type AnswerError struct {
	Index    int
	Question string
	Err      error
}

func (e *AnswerError) Error() string {
	return fmt.Sprintf("answers[%d] (question %q): %v", e.Index, e.Question, e.Err)
}

func (e *AnswerError) Unwrap() error { return e.Err }

func parseResponse(req decision.Request, body []byte, strict bool) (*Reply, error) {
	if !json.Valid(body) {
		return nil, errors.New("body: not valid JSON")
	}
	if path, _, bad := jsonx.InvalidText(body); bad {
		return nil, fmt.Errorf("%s: a string is not valid UTF-8", paramOf(body, path))
	}
	top, err := jsonx.Members(body)
	if err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	r := &Reply{}
	if r.Model, err = str(top, "model"); err != nil {
		return nil, err
	}
	if r.Model == "" {
		return nil, errors.New("model: must not be empty")
	}
	if r.Usage, err = usage(top); err != nil {
		return nil, err
	}
	raw, ok := jsonx.Lookup(top, "answers")
	if !ok || jsonx.Kind(raw) != "array" {
		return nil, errors.New("answers: an array is required")
	}
	answers := elements(raw)
	n := len(req.Questions)
	if len(answers) != n {
		return nil, fmt.Errorf("answers: %d answers for %d questions", len(answers), n)
	}
	r.Answers, r.Dists, r.Refused = make([]decision.Answer, n), make([]decision.Distribution, n), make([]bool, n)
	for i, q := range req.Questions {
		ms, err := jsonx.Members(answers[i])
		if err == nil {
			r.Answers[i], r.Dists[i], r.Refused[i], err = parseAnswer(q, ms, strict)
		}
		if err != nil {
			return nil, &AnswerError{Index: i, Question: q.ID, Err: err}
		}
	}
	return r, nil
}

func parseAnswer(q decision.Question, ms []jsonx.Member, strict bool) (decision.Answer, decision.Distribution, bool, error) {
	a := decision.Answer{Kind: q.Kind}
	typ, err := str(ms, "type")
	if err != nil {
		return a, nil, false, err
	}
	// Every question was sent with its id as name: the AI SDK and
	// promptfoo match answers to questions by it, a refusal included.
	name, err := str(ms, "name")
	if err != nil {
		return a, nil, false, err
	}
	if name != q.ID {
		return a, nil, false, fmt.Errorf("name %q, asked %q", name, q.ID)
	}
	if typ == "refusal" {
		return decision.Answer{}, nil, true, nil
	}
	if want := TypeName(q.Kind); typ != want {
		return a, nil, false, fmt.Errorf("type %q, asked %q", typ, want)
	}
	if q.Kind == decision.Noul {
		p, err := unit(ms, "probability")
		if err != nil {
			return a, nil, false, err
		}
		a.Noul = p
		return a, decision.Distribution{p, 1 - p}, false, nil
	}
	if a.Confidence, err = unit(ms, "confidence"); err != nil {
		return a, nil, false, err
	}
	raw, ok := jsonx.Lookup(ms, "probabilities")
	if !ok || jsonx.Kind(raw) != "array" {
		return a, nil, false, errors.New("probabilities: an array is required")
	}
	items := elements(raw)
	k := len(q.Options)
	if len(items) != k {
		return a, nil, false, fmt.Errorf("probabilities: %d entries for %d options", len(items), k)
	}
	d := make(decision.Distribution, k)
	seen := make([]bool, k)
	var sum float64
	for j, it := range items {
		fs, err := jsonx.Members(it)
		if err != nil {
			return a, nil, false, fmt.Errorf("probabilities[%d]: %w", j, err)
		}
		at := func(err error) error { return fmt.Errorf("probabilities[%d].%w", j, err) }
		p, err := unit(fs, "probability")
		if err != nil {
			return a, nil, false, at(err)
		}
		var idx int
		if q.Kind == decision.Choice {
			v, err := str(fs, "value")
			if err != nil {
				return a, nil, false, at(err)
			}
			if idx = q.OptionIndex(v); idx < 0 {
				return a, nil, false, at(fmt.Errorf("value %q is not one of the choices", v))
			}
		} else {
			if idx, err = count(fs, "value"); err != nil {
				return a, nil, false, at(err)
			}
			if idx >= k {
				return a, nil, false, at(fmt.Errorf("value %d is not a level of %d", idx, k))
			}
			label, err := str(fs, "label")
			if err != nil {
				return a, nil, false, at(err)
			}
			if want := levelLabel(q.Options[idx]); label != want {
				return a, nil, false, at(fmt.Errorf("label %q, sent %q", label, want))
			}
		}
		if seen[idx] {
			return a, nil, false, at(errors.New("value: listed twice"))
		}
		seen[idx] = true
		d[idx] = p
		sum += p
	}
	tol := aiSDKTolerance + float64(k)*aiSDKRounding
	if strict {
		tol = min(tol, promptfooTolerance)
	}
	// From 200 options on, n x 0.005 lets a sum of 0 through, which
	// renormalises to no distribution at all.
	if math.Abs(sum-1) > tol || sum == 0 {
		return a, nil, false, fmt.Errorf("probabilities sum to %v", sum)
	}
	switch q.Kind {
	case decision.Choice:
		choice, err := str(ms, "choice")
		if err != nil {
			return a, nil, false, err
		}
		c := q.OptionIndex(choice)
		if c < 0 {
			return a, nil, false, fmt.Errorf("choice %q is not one of the choices", choice)
		}
		for _, p := range d {
			if p > d[c]+aiSDKTolerance+2*aiSDKRounding {
				return a, nil, false, fmt.Errorf("choice %q (%v) is not a highest-probability option (%v)", choice, d[c], p)
			}
		}
		a.Choice = choice
	case decision.Score:
		s, err := number(ms, "score")
		if err != nil {
			return a, nil, false, err
		}
		if s < 0 || s > float64(k-1) {
			return a, nil, false, fmt.Errorf("score %v is not in [0, %d]", s, k-1)
		}
		var mean float64
		for i, p := range d {
			mean += float64(i) * p
		}
		diff := math.Abs(mean - s)
		if diff > aiSDKTolerance+aiSDKRounding*float64(k*(k-1)/2)+aiSDKRounding || (strict && diff/float64(k-1) > promptfooTolerance) {
			return a, nil, false, fmt.Errorf("score %v is not the probability-weighted mean %v of its levels", s, mean)
		}
		a.Score = s
	}
	a.Probabilities = append([]float64(nil), d...)
	// Rounded values sum to 1 only within the tolerance; the distribution
	// itself must.
	if sum > 0 {
		for i := range d {
			d[i] /= sum
		}
	}
	return a, d, false, nil
}

func usage(top []jsonx.Member) (Usage, error) {
	var u Usage
	raw, ok := jsonx.Lookup(top, "usage")
	if !ok {
		return u, errors.New("usage: an object is required")
	}
	ms, err := jsonx.Members(raw)
	if err != nil {
		return u, fmt.Errorf("usage: %w", err)
	}
	details := func(key string) ([]jsonx.Member, error) {
		raw, ok := jsonx.Lookup(ms, key)
		if !ok {
			return nil, fmt.Errorf("usage.%s: an object is required", key)
		}
		d, err := jsonx.Members(raw)
		if err != nil {
			return nil, fmt.Errorf("usage.%s: %w", key, err)
		}
		return d, nil
	}
	in, err := details("input_tokens_details")
	if err != nil {
		return u, err
	}
	out, err := details("output_tokens_details")
	if err != nil {
		return u, err
	}
	for _, c := range []struct {
		ms  []jsonx.Member
		at  string
		key string
		to  *int
	}{
		{ms, "usage", "input_tokens", &u.InputTokens},
		{in, "usage.input_tokens_details", "cached_tokens", &u.CachedTokens},
		{in, "usage.input_tokens_details", "cache_write_tokens", &u.CacheWriteTokens},
		{ms, "usage", "output_tokens", &u.OutputTokens},
		{out, "usage.output_tokens_details", "reasoning_tokens", &u.ReasoningTokens},
		{ms, "usage", "total_tokens", new(int)},
	} {
		n, err := count(c.ms, c.key)
		if err != nil {
			return u, fmt.Errorf("%s.%w", c.at, err)
		}
		*c.to = n
	}
	return u, nil
}

// str reads a string field.
func str(ms []jsonx.Member, key string) (string, error) {
	raw, ok := jsonx.Lookup(ms, key)
	if !ok || jsonx.Kind(raw) != "string" {
		return "", fmt.Errorf("%s: a string is required", key)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid and UTF-8, as checked for the body
	return s, nil
}

// number reads a finite number field.
func number(ms []jsonx.Member, key string) (float64, error) {
	raw, ok := jsonx.Lookup(ms, key)
	var x float64
	if !ok || jsonx.Kind(raw) != "number" || json.Unmarshal(raw, &x) != nil {
		return 0, fmt.Errorf("%s: a finite number is required", key)
	}
	return x, nil
}

// unit reads a probability: a number in [0,1].
func unit(ms []jsonx.Member, key string) (float64, error) {
	x, err := number(ms, key)
	if err != nil || x < 0 || x > 1 {
		return 0, fmt.Errorf("%s: a number in [0,1] is required", key)
	}
	return x, nil
}

// maxCount is the largest integer JavaScript holds exactly.
const maxCount = 1<<53 - 1

// count reads a non-negative integer, as JavaScript's Number.isInteger
// sees one (so 3.0 is one).
func count(ms []jsonx.Member, key string) (int, error) {
	x, err := number(ms, key)
	if err != nil || x < 0 || x != math.Trunc(x) || x > maxCount {
		raw, _ := jsonx.Lookup(ms, key)
		return 0, fmt.Errorf("%s: %s is not a non-negative integer", key, strconv.Quote(string(raw)))
	}
	return int(x), nil
}
