package systemone

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"system1/internal/decision"
	"system1/internal/jsonx"
)

// Reply is a System One response read back: per question, the answer as
// reported and the distribution it carries.
type Reply struct {
	Model   string
	Usage   Usage
	Answers []decision.Answer       // aligned with the request's questions
	Dists   []decision.Distribution // aligned; a noul's is [P(true), P(false)]
	// Abstained is aligned too: why the endpoint marked an answer
	// abstained (laya-serve's abstention gate), or "" when it did not.
	Abstained []string
}

// ParseResponse reads a System One response to req, applying every check
// that the real clients apply (wire doc section 6): JDE's parseAnswers and
// checkAnswers, jev-ultrafast's validate_choice, promptfoo's checks and
// the Python SDK's strict types. A reply that fails any of them is an
// error: it would break some client, so it is never passed on.
//
// The body is read once (replyReader): its syntax is checked as it is
// read, straight into what the checks need, with no reflection and no
// maps. It reads JSON as encoding/json reads it into the types this
// package used before (FuzzParseResponseAsBefore holds it to that): a
// field of the wrong JSON type fails the reply, a repeated key's last
// value counts (a repeated object of probabilities or a legend adds its
// keys to the first), null is an absent field, and field names match
// regardless of case.
func ParseResponse(req decision.Request, body []byte) (*Reply, error) {
	if k := jsonx.Kind(body); k != "object" {
		return nil, fmt.Errorf("body: a JSON object is required, got %s", k)
	}
	rd := replyReader{in: body, req: req}
	w, err := rd.read()
	if err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if w.model == "" {
		return nil, errors.New("model: a non-empty string is required")
	}
	if !w.hasAnswers {
		return nil, errors.New("answers: an object is required")
	}
	if !w.hasUsage {
		return nil, errors.New("usage: an object is required")
	}
	n := len(req.Questions)
	r := &Reply{Model: w.model, Answers: make([]decision.Answer, n), Dists: make([]decision.Distribution, n), Abstained: make([]string, n)}
	if r.Usage.InputTokens, err = tokenCount(w.input); err != nil {
		return nil, fmt.Errorf("usage.input_tokens: %w", err)
	}
	if r.Usage.OutputTokens, err = tokenCount(w.output); err != nil {
		return nil, fmt.Errorf("usage.output_tokens: %w", err)
	}
	for i, q := range req.Questions {
		wa := &w.answers[i]
		if !wa.set {
			return nil, fmt.Errorf("answers.%s: missing", q.ID)
		}
		if r.Answers[i], r.Dists[i], err = checkAnswer(q, wa); err != nil {
			return nil, fmt.Errorf("answers.%s: %w", q.ID, err)
		}
		r.Abstained[i] = abstained(wa.abstention, wa.lowConfidence, wa.threshold)
	}
	if w.hasExtra {
		return nil, fmt.Errorf("answers.%s: an answer to a question that was not asked", w.extra)
	}
	return r, nil
}

// tokenCount accepts a JSON integer (the Python SDK's strict mode refuses
// 296.0) or null, read as 0.
func tokenCount(raw json.RawMessage) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s is not a non-negative JSON integer", raw)
	}
	return n, nil
}

// wireReply is a reply as read, before the checks.
type wireReply struct {
	model string // "" when absent or null, which the checks refuse alike
	// answers are aligned with the request's questions; hasAnswers is
	// whether "answers" was an object (the last time it was sent).
	answers    []wireAnswer
	hasAnswers bool
	// extra is the first answer id that was not asked.
	extra    string
	hasExtra bool
	// usage's members verbatim.
	input, output json.RawMessage
	hasUsage      bool
}

// wireAnswer is one answer as read, before the checks.
type wireAnswer struct {
	set        bool // an object was sent (the last time the id was sent)
	typ        string
	choice     string
	hasChoice  bool
	noul       float64
	hasNoul    bool
	score      float64
	hasScore   bool
	confidence float64
	hasConf    bool
	// legend and probabilities by the question's option keys.
	legend, probabilities keyed
	// laya-serve's abstention gate, verbatim; other endpoints send
	// neither. They are read leniently: a mark of another type is no mark.
	abstention, lowConfidence, threshold json.RawMessage
}

// keyed is an object keyed by option keys: which of the question's
// options it has, with their values (probabilities), and how many
// distinct keys it has in all.
type keyed struct {
	has    optionSet
	vals   []float64 // by option, for probabilities
	keys   int
	others map[string]bool // keys that are not options, rarely any
}

// add counts key, option i of the question (-1: none of them).
func (k *keyed) add(i int, key []byte, plain bool) {
	if i >= 0 {
		if !k.has.has(i) {
			k.has.add(i)
			k.keys++
		}
		return
	}
	s := decodeString(key, plain)
	if !k.others[s] {
		if k.others == nil {
			k.others = map[string]bool{}
		}
		k.others[s] = true
		k.keys++
	}
}

// optionSet is a set of option indexes: a word for up to 64 options.
type optionSet struct {
	small uint64
	big   []bool
	n     int // the options
}

func (s *optionSet) has(i int) bool {
	if s.n <= 64 {
		return s.small&(1<<i) != 0
	}
	return s.big[i]
}

func (s *optionSet) add(i int) {
	if s.n <= 64 {
		s.small |= 1 << i
		return
	}
	s.big[i] = true
}

func (s *optionSet) clear() {
	s.small = 0
	clear(s.big)
}

// abstained says why the endpoint marked an answer abstained, from its
// "abstention" ("abstained"), "low_confidence" (true) and
// "abstention_threshold" fields, or "".
func abstained(abstention, lowConfidence, threshold json.RawMessage) string {
	if len(abstention) == 0 && len(lowConfidence) == 0 {
		return "" // no mark sent, the common case: nothing to decode
	}
	var mark string
	var low bool
	_ = json.Unmarshal(abstention, &mark)
	_ = json.Unmarshal(lowConfidence, &low)
	if mark != "abstained" && !low {
		return ""
	}
	var th float64
	if json.Unmarshal(threshold, &th) == nil && len(threshold) > 0 && string(threshold) != "null" {
		return fmt.Sprintf("the endpoint marked its answer abstained (its confidence was under its own threshold %v)", th)
	}
	return "the endpoint marked its answer abstained (low confidence)"
}

// checkAnswer applies the clients' checks to an answer to q, and returns
// it with the distribution it carries.
func checkAnswer(q decision.Question, a *wireAnswer) (decision.Answer, decision.Distribution, error) {
	if a.typ != string(q.Kind) {
		return decision.Answer{}, nil, fmt.Errorf("type %q, asked %q", a.typ, q.Kind)
	}
	out := decision.Answer{Kind: q.Kind}
	choice := -1
	switch q.Kind {
	case decision.Noul:
		if !a.hasNoul || !unit(a.noul) {
			return out, nil, errors.New("noul: a number in [0,1] is required")
		}
		out.Noul = a.noul
		return out, decision.Distribution{a.noul, 1 - a.noul}, nil
	case decision.Choice:
		if !a.hasChoice {
			return out, nil, errors.New("choice: a string is required")
		}
		out.Choice = a.choice
		if choice = q.OptionIndex(a.choice); choice < 0 {
			return out, nil, fmt.Errorf("choice %q is not one of the options", a.choice)
		}
	case decision.Score:
		if !a.hasScore || math.IsNaN(a.score) || a.score < 0 || a.score > float64(len(q.Options)-1) {
			return out, nil, fmt.Errorf("score: a number in [0, %d] is required", len(q.Options)-1)
		}
		out.Score = a.score
		if a.legend.keys != len(q.Options) {
			return out, nil, fmt.Errorf("legend: %d levels, asked %d", a.legend.keys, len(q.Options))
		}
		for i, o := range q.Options {
			if !a.legend.has.has(i) {
				return out, nil, fmt.Errorf("legend: level %s missing", o.Key)
			}
		}
	}
	if !a.hasConf || !unit(a.confidence) {
		return out, nil, errors.New("confidence: a number in [0,1] is required")
	}
	out.Confidence = a.confidence
	if a.probabilities.keys != len(q.Options) {
		return out, nil, fmt.Errorf("probabilities: %d keys for %d options", a.probabilities.keys, len(q.Options))
	}
	// One allocation for the probabilities as reported and the
	// distribution, normalised.
	n := len(q.Options)
	both := make([]float64, 2*n)
	reported, d := both[:n:n], decision.Distribution(both[n:])
	var sum, top float64
	for i, o := range q.Options {
		if !a.probabilities.has.has(i) {
			return out, nil, fmt.Errorf("probabilities: %q missing", o.Key)
		}
		p := a.probabilities.vals[i]
		if !unit(p) {
			return out, nil, fmt.Errorf("probabilities.%s: %v is not in [0,1]", o.Key, p)
		}
		reported[i] = p
		sum += p
		top = math.Max(top, p)
	}
	// promptfoo's tolerance, the tightest of the clients.
	if tol := math.Max(1e-4, float64(n)*5e-7); math.Abs(sum-1) > tol {
		return out, nil, fmt.Errorf("probabilities sum to %v", sum)
	}
	if q.Kind == decision.Choice && reported[choice] < top {
		return out, nil, fmt.Errorf("choice %q is not an argmax of the probabilities", out.Choice)
	}
	out.Probabilities = reported
	// Rounded values may sum to 1 within the tolerance only; the
	// distribution itself must sum to 1.
	for i, p := range reported {
		d[i] = p / sum
	}
	return out, d, nil
}

func unit(x float64) bool { return !math.IsNaN(x) && x >= 0 && x <= 1 }

// replyReader reads a reply body in one pass, checking its syntax as
// encoding/json does and keeping what the checks need (see ParseResponse).
type replyReader struct {
	in    []byte
	i     int
	depth int
	req   decision.Request
	// next is the question the next answer most likely answers: replies
	// keep the request's order, so a lookup is one comparison.
	next int
}

// The fields read: topFields of the reply, answerFields of an answer,
// usageFields of usage.
var (
	topFields    = []string{"model", "answers", "usage"}
	answerFields = []string{"type", "choice", "noul", "score", "confidence", "legend", "probabilities",
		"abstention", "low_confidence", "abstention_threshold"}
	usageFields = []string{"input_tokens", "output_tokens"}
)

// read reads the whole body.
func (r *replyReader) read() (*wireReply, error) {
	w := &wireReply{}
	err := r.object(func(key []byte, plain bool) error {
		switch field(key, plain, topFields) {
		case "model":
			s, _, err := r.str()
			if err != nil {
				return fmt.Errorf("model: %w", err)
			}
			w.model = s
			return nil
		case "answers":
			return r.answers(w)
		case "usage":
			return r.usage(w)
		}
		return r.skip()
	})
	if err != nil {
		return nil, err
	}
	if r.space(); r.i < len(r.in) {
		return nil, r.syntax("after the top-level value")
	}
	return w, nil
}

// answers reads the answers object into w: an answer to a question asked
// into its place, another's only to check it. Null leaves no answers, as
// it leaves encoding/json's map nil; a repeated object adds to the first.
func (r *replyReader) answers(w *wireReply) error {
	switch r.peek() {
	case 'n':
		w.hasAnswers, w.hasExtra, w.extra = false, false, ""
		for i := range w.answers {
			w.answers[i].set = false
		}
		return r.literal("null")
	case '{':
	default:
		return fmt.Errorf("answers: %w", r.typeError("an object"))
	}
	w.hasAnswers = true
	if w.answers == nil {
		w.answers = make([]wireAnswer, len(r.req.Questions))
	}
	return r.object(func(key []byte, plain bool) error {
		i := r.question(key, plain)
		if i < 0 {
			id := decodeString(key, plain)
			if !w.hasExtra {
				w.extra, w.hasExtra = id, true
			}
			var scratch wireAnswer
			return r.answer(nil, &scratch, id)
		}
		return r.answer(&r.req.Questions[i], &w.answers[i], r.req.Questions[i].ID)
	})
}

// answer reads one answer to q (nil: a question not asked) into a, anew.
func (r *replyReader) answer(q *decision.Question, a *wireAnswer, id string) error {
	switch r.peek() {
	case 'n':
		a.set = false
		return r.literal("null")
	case '{':
	default:
		return fmt.Errorf("answers.%s: %w", id, r.typeError("an object"))
	}
	*a = wireAnswer{set: true}
	return r.object(func(key []byte, plain bool) error {
		f := field(key, plain, answerFields)
		var err error
		var null bool // null empties a pointer field
		switch f {
		case "type":
			var s string
			if s, null, err = r.str(); !null {
				a.typ = s // null leaves a string field as it was
			}
		case "choice":
			a.choice, null, err = r.str()
			a.hasChoice = !null
		case "noul":
			a.noul, null, err = r.num()
			a.hasNoul = !null
		case "score":
			a.score, null, err = r.num()
			a.hasScore = !null
		case "confidence":
			a.confidence, null, err = r.num()
			a.hasConf = !null
		case "legend":
			err = r.keyed(q, &a.legend, false)
		case "probabilities":
			err = r.keyed(q, &a.probabilities, true)
		case "abstention":
			a.abstention, err = r.raw()
		case "low_confidence":
			a.lowConfidence, err = r.raw()
		case "abstention_threshold":
			a.threshold, err = r.raw()
		default:
			return r.skip()
		}
		if err != nil {
			return fmt.Errorf("answers.%s.%s: %w", id, f, err)
		}
		return nil
	})
}

// keyed reads a legend (any values) or probabilities (numbers; null is 0,
// as encoding/json leaves a map's number) keyed by q's options. Null
// empties it; a repeated object adds to the first.
func (r *replyReader) keyed(q *decision.Question, k *keyed, numbers bool) error {
	switch r.peek() {
	case 'n':
		k.has.clear()
		k.keys, k.others = 0, nil
		return r.literal("null")
	case '{':
	default:
		return r.typeError("an object")
	}
	n := 0
	if q != nil {
		n = len(q.Options)
	}
	if k.has.n = n; n > 64 && k.has.big == nil {
		k.has.big = make([]bool, n)
	}
	if numbers && k.vals == nil {
		k.vals = make([]float64, n)
	}
	next := 0 // replies list the options in order
	return r.object(func(key []byte, plain bool) error {
		i := -1
		if q != nil {
			i = option(q, key, plain, next)
			next = i + 1
		}
		if numbers {
			p, _, err := r.num()
			if err != nil {
				return fmt.Errorf("%s: %w", decodeString(key, plain), err)
			}
			if i >= 0 {
				k.vals[i] = p
			}
		} else if err := r.skip(); err != nil {
			return err
		}
		if q != nil {
			k.add(i, key, plain)
		}
		return nil
	})
}

// usage reads usage's token counts verbatim. Null leaves no usage; a
// repeated object adds to the first.
func (r *replyReader) usage(w *wireReply) error {
	switch r.peek() {
	case 'n':
		w.hasUsage, w.input, w.output = false, nil, nil
		return r.literal("null")
	case '{':
	default:
		return fmt.Errorf("usage: %w", r.typeError("an object"))
	}
	w.hasUsage = true
	return r.object(func(key []byte, plain bool) (err error) {
		switch field(key, plain, usageFields) {
		case "input_tokens":
			w.input, err = r.raw()
		case "output_tokens":
			w.output, err = r.raw()
		default:
			err = r.skip()
		}
		return err
	})
}

// question is the index of the question whose id is the key q, or -1.
func (r *replyReader) question(q []byte, plain bool) int {
	qs := r.req.Questions
	k := unquote(q, plain)
	if r.next < len(qs) && string(k) == qs[r.next].ID {
		r.next++
		return r.next - 1
	}
	for i := range qs {
		if string(k) == qs[i].ID {
			r.next = i + 1
			return i
		}
	}
	return -1
}

// option is the index of q's option whose key is the key k, or -1,
// looked for first at next.
func option(q *decision.Question, k []byte, plain bool, next int) int {
	k = unquote(k, plain)
	if next < len(q.Options) && string(k) == q.Options[next].Key {
		return next
	}
	for i := range q.Options {
		if string(k) == q.Options[i].Key {
			return i
		}
	}
	return -1
}

// field is the name of names that the key q names, or "". As
// encoding/json, a name matches exactly or else regardless of case
// (strings.EqualFold), after the key is decoded.
func field(q []byte, plain bool, names []string) string {
	k := unquote(q, plain)
	for _, n := range names {
		if string(k) == n {
			return n
		}
	}
	for _, n := range names {
		if strings.EqualFold(string(k), n) {
			return n
		}
	}
	return ""
}

// unquote is what a key q holds: a plain key's bytes as sent, without
// allocating, the rarer others decoded.
func unquote(q []byte, plain bool) []byte {
	if plain {
		return q[1 : len(q)-1]
	}
	return []byte(decodeString(q, plain))
}

// str reads a string, or null.
func (r *replyReader) str() (s string, null bool, err error) {
	switch r.peek() {
	case '"':
		q, plain, err := r.stringToken()
		if err != nil {
			return "", false, err
		}
		return decodeString(q, plain), false, nil
	case 'n':
		return "", true, r.literal("null")
	}
	return "", false, r.typeError("a string")
}

// num reads a number into a float64, or null (0).
func (r *replyReader) num() (f float64, null bool, err error) {
	switch c := r.peek(); {
	case c == '-' || c >= '0' && c <= '9':
		lit, err := r.number()
		if err != nil {
			return 0, false, err
		}
		if f, err = strconv.ParseFloat(string(lit), 64); err != nil {
			return 0, false, fmt.Errorf("the number %s does not fit a float64", lit)
		}
		return f, false, nil
	case c == 'n':
		return 0, true, r.literal("null")
	}
	return 0, false, r.typeError("a number")
}

// raw reads any value and returns it verbatim.
func (r *replyReader) raw() (json.RawMessage, error) {
	r.space()
	start := r.i
	if err := r.skip(); err != nil {
		return nil, err
	}
	return r.in[start:r.i], nil
}
