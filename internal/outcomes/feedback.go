package outcomes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"system1/internal/decisionlog"
	"system1/internal/jsonx"
	"system1/internal/tracing"
)

// MaxFeedbackOutcomes bounds the outcomes of one feedback batch.
const MaxFeedbackOutcomes = 1000

// Feedback codes: why a feedback call recorded nothing.
const (
	// FeedbackInvalid: the call or one of its outcomes is not valid; Param
	// names the field (outcome, question, request_id, or outcomes.N.field).
	FeedbackInvalid = "invalid_request"
	// FeedbackUnknownRequest: no answer was recorded under the request id.
	FeedbackUnknownRequest = "unknown_request"
	// FeedbackLogOff: the decision log is off or could not be opened.
	FeedbackLogOff = "log_off"
	// FeedbackLogError: the log failed to read or write.
	FeedbackLogError = "log_error"
)

// Feedback records outcomes: what turned out right for questions answered
// earlier, matched to their records in the decision log. Every face (POST
// /v1/feedback, the MCP tool, the CLI) parses the caller's input and
// calls it; the rules are here, once.
type Feedback struct {
	log *decisionlog.Log
}

// NewFeedback records outcomes in log; a nil log refuses every call with
// FeedbackLogOff.
func NewFeedback(log *decisionlog.Log) *Feedback { return &Feedback{log: log} }

// FeedbackItem is one outcome as a caller reports it.
type FeedbackItem struct {
	RequestID string `json:"request_id" jsonschema:"The request_id of the answer: the decide response's request_id, or the x-typesafe-request-id of a /v1/systemone reply."`
	Question  string `json:"question,omitempty" jsonschema:"The question's id within the request; leave out for a decide result, which has one question."`
	// Outcome is raw JSON: a string, true or false, or a whole number.
	Outcome json.RawMessage `json:"outcome" jsonschema:"What turned out right: one of the options for a decide result (yes or no, or true or false, for a yes/no question), a criteria key for a choice, true or false for a noul, a level for a score; or none for a choice none of whose options was right (unless none is one of them)."`
	// batched is set on an entry of {"outcomes": [...]}, whose problems
	// are named outcomes.N.field even in a batch of one.
	batched bool
}

// Recorded is one outcome recorded.
type Recorded struct {
	RequestID string `json:"request_id" jsonschema:"The request the outcome is for."`
	Question  string `json:"question" jsonschema:"The question the outcome is for."`
	Outcome   string `json:"outcome" jsonschema:"The option key recorded."`
	// Outcomes counts the outcomes reported for the question so far; the
	// latest wins.
	Outcomes int `json:"outcomes" jsonschema:"How many outcomes the question has had, this one included; the latest wins."`
}

// FeedbackError says why a feedback call recorded nothing.
type FeedbackError struct {
	Code    string `json:"code" jsonschema:"invalid_request, unknown_request, log_off or log_error."`
	Param   string `json:"param,omitempty" jsonschema:"The field at fault, such as outcome or question (outcomes.N.outcome in a batch)."`
	Message string `json:"message" jsonschema:"What went wrong."`
	// Type is the kind of problem, as a 422's detail names it:
	// duplicate_key, string_unicode or value_error.
	Type string `json:"-"`
	// path is Param's parts, which a key with a dot in it would not
	// survive being joined.
	path []string
}

// Path is the field at fault as a path: outcomes, 0, outcome.
func (e *FeedbackError) Path() []string { return e.path }

// err is the result's error as an error, nil when there is none: what a
// span records of it.
func (r *FeedbackResult) err() error {
	if r.Error == nil {
		return nil
	}
	return errors.New(r.Error.Code + ": " + r.Error.Message)
}

// FeedbackResult is the answer to a feedback call: every outcome recorded,
// or none and an error.
type FeedbackResult struct {
	Recorded []Recorded     `json:"recorded" jsonschema:"The outcomes recorded, in the order given; empty on error."`
	Error    *FeedbackError `json:"error,omitempty" jsonschema:"Why nothing was recorded; absent on success."`
}

func feedbackFail(code, param, format string, a ...any) *FeedbackResult {
	var path []string
	if param != "" {
		path = strings.Split(param, ".")
	}
	return feedbackFailAt(code, "value_error", path, format, a...)
}

// feedbackFailAt fails at a path whose parts may hold dots (a key as
// sent), with the problem's type.
func feedbackFailAt(code, typ string, path []string, format string, a ...any) *FeedbackResult {
	return &FeedbackResult{Recorded: []Recorded{}, Error: &FeedbackError{Code: code, Param: strings.Join(path, "."), Message: fmt.Sprintf(format, a...),
		Type: typ, path: path}}
}

var (
	itemFields  = []string{"request_id", "question", "outcome"}
	batchFields = []string{"outcomes"}
)

// ParseFeedback reads a feedback body: one outcome
// {"request_id","question","outcome"}, or a batch {"outcomes":[...]}. It
// reads as strictly as /v1/systemone: a key given twice anywhere, and
// text that is not valid UTF-8 or holds an unpaired surrogate escape
// (which a JSON reader would turn into U+FFFD), are refused. The error
// result names the field at fault.
func ParseFeedback(raw []byte) ([]FeedbackItem, *FeedbackResult) {
	const shape = `the body must be a JSON object: {"request_id", "question", "outcome"}, or {"outcomes": [...]}`
	if !json.Valid(raw) {
		return nil, feedbackFail(FeedbackInvalid, "", shape)
	}
	if path, isKey, bad := jsonx.InvalidText(raw); bad {
		if isKey {
			return nil, feedbackFailAt(FeedbackInvalid, "string_unicode", path[:len(path)-1], "the key %q is not valid UTF-8 (or holds an unpaired surrogate escape); send UTF-8 text", path[len(path)-1])
		}
		return nil, feedbackFailAt(FeedbackInvalid, "string_unicode", path, "the string is not valid UTF-8 (or holds an unpaired surrogate escape); send UTF-8 text")
	}
	top, bad := members(raw, nil, shape)
	if bad != nil {
		return nil, bad
	}
	batch, ok := jsonx.Lookup(top, "outcomes")
	if !ok {
		it, bad := parseItem(top, nil)
		if bad != nil {
			return nil, bad
		}
		return []FeedbackItem{it}, nil
	}
	if p := unknownField(top, batchFields); p != "" {
		return nil, feedbackFailAt(FeedbackInvalid, "value_error", []string{p}, "unknown field %q: a batch has only outcomes", p)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(batch, &items); err != nil || items == nil {
		return nil, feedbackFail(FeedbackInvalid, "outcomes", "outcomes must be an array of {request_id, question, outcome} objects")
	}
	if len(items) == 0 || len(items) > MaxFeedbackOutcomes {
		return nil, feedbackFail(FeedbackInvalid, "outcomes", "outcomes has %d entries; send 1 to %d", len(items), MaxFeedbackOutcomes)
	}
	out := make([]FeedbackItem, 0, len(items))
	for i, item := range items {
		at := []string{"outcomes", strconv.Itoa(i)}
		m, bad := members(item, at, fmt.Sprintf("outcomes[%d] must be an object {request_id, question, outcome}", i))
		if bad != nil {
			return nil, bad
		}
		it, bad := parseItem(m, at)
		if bad != nil {
			return nil, bad
		}
		it.batched = true
		out = append(out, it)
	}
	return out, nil
}

// members reads the object at path, refusing a key given twice; notObject
// is the message when it is not an object.
func members(raw json.RawMessage, path []string, notObject string) ([]jsonx.Member, *FeedbackResult) {
	ms, err := jsonx.Members(raw)
	var dup *jsonx.DuplicateKeyError
	switch {
	case errors.As(err, &dup):
		return nil, feedbackFailAt(FeedbackInvalid, "duplicate_key", append(slices.Clip(path), dup.Key), "the key %q appears twice; send each field once", dup.Key)
	case err != nil:
		return nil, feedbackFailAt(FeedbackInvalid, "value_error", path, "%s", notObject)
	}
	return ms, nil
}

func unknownField(ms []jsonx.Member, known []string) string {
	var unknown []string
	for _, m := range ms {
		if !slices.Contains(known, m.Key) {
			unknown = append(unknown, m.Key)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	return slices.Min(unknown)
}

// parseItem reads one outcome's fields, at path in the body.
func parseItem(ms []jsonx.Member, path []string) (FeedbackItem, *FeedbackResult) {
	at := func(field string) []string { return append(slices.Clip(path), field) }
	if p := unknownField(ms, itemFields); p != "" {
		return FeedbackItem{}, feedbackFailAt(FeedbackInvalid, "value_error", at(p), "unknown field %q; the fields are request_id, question and outcome", p)
	}
	var it FeedbackItem
	strs := []struct {
		key string
		dst *string
	}{{"request_id", &it.RequestID}, {"question", &it.Question}}
	for _, f := range strs {
		v, ok := jsonx.Lookup(ms, f.key)
		if ok && string(v) != "null" && (jsonx.Kind(v) != "string" || json.Unmarshal(v, f.dst) != nil) {
			return it, feedbackFailAt(FeedbackInvalid, "value_error", at(f.key), "%s must be a string", f.key)
		}
	}
	if v, ok := jsonx.Lookup(ms, "outcome"); ok && string(v) != "null" {
		it.Outcome = v
	}
	return it, nil
}

// Record checks every item against the log and, when all pass, records
// them in order, in one transaction; otherwise it records none and says
// which failed and why. A store that fails the write records none of
// them either (log_error): the batch can be sent again whole.
func (f *Feedback) Record(ctx context.Context, items []FeedbackItem) (res *FeedbackResult) {
	ctx, span := tracing.StartFeedback(ctx, len(items))
	defer func() { tracing.EndFeedback(span, len(res.Recorded), res.err()) }()
	if f == nil || f.log == nil {
		return feedbackFail(FeedbackLogOff, "", "the decision log is off (decision_log in the configuration), so outcomes cannot be matched to answers")
	}
	if len(items) == 0 || len(items) > MaxFeedbackOutcomes {
		return feedbackFail(FeedbackInvalid, "outcomes", "%d outcomes; send 1 to %d", len(items), MaxFeedbackOutcomes)
	}
	checked := make([]decisionlog.Checked, len(items))
	for i, it := range items {
		prefix := ""
		if len(items) > 1 || it.batched {
			prefix = "outcomes." + strconv.Itoa(i) + "."
		}
		if bad := checkItem(it, prefix); bad != nil {
			return bad
		}
		key, err := decisionlog.ParseOutcome(it.Outcome)
		if err != nil {
			return feedbackFail(FeedbackInvalid, prefix+"outcome", "%v", err)
		}
		e, err := f.log.Check(ctx, it.RequestID, it.Question, key)
		var oe *decisionlog.OutcomeError
		if errors.As(err, &oe) {
			// A decide result's yes/no is its noul's true/false.
			if alt, ok := yesNo[key]; ok && slices.Equal(oe.Options, []string{"true", "false"}) {
				key = alt
				e, err = f.log.Check(ctx, it.RequestID, it.Question, key)
			}
		}
		if err != nil {
			return outcomeFailure(err, prefix)
		}
		checked[i] = decisionlog.Checked{Entry: e, Outcome: key}
	}
	// Checked above: only the store can fail now, and the batch is one
	// transaction, so then none of it is recorded and the caller sends
	// it again whole.
	es, err := f.log.Outcomes(ctx, checked)
	if err != nil {
		return outcomeFailure(err, "")
	}
	res = &FeedbackResult{Recorded: make([]Recorded, 0, len(items))}
	for i, e := range es {
		res.Recorded = append(res.Recorded, Recorded{RequestID: items[i].RequestID, Question: e.QuestionID, Outcome: checked[i].Outcome, Outcomes: e.Outcomes})
	}
	return res
}

var yesNo = map[string]string{"yes": "true", "no": "false"}

func checkItem(it FeedbackItem, prefix string) *FeedbackResult {
	switch {
	case it.RequestID == "":
		return feedbackFail(FeedbackInvalid, prefix+"request_id", "request_id is required: the id of the answer the outcome is for")
	case utf8.RuneCountInString(it.RequestID) > decisionlog.MaxRequestIDChars:
		// Counted as decide counts it: an id it accepted is one feedback
		// takes. A question id has no limit but the body's, as on
		// /v1/systemone.
		return feedbackFail(FeedbackInvalid, prefix+"request_id", "request_id is longer than %d characters", decisionlog.MaxRequestIDChars)
	case len(it.Outcome) == 0:
		return feedbackFail(FeedbackInvalid, prefix+"outcome", "outcome is required: the option that turned out right")
	}
	return nil
}

// outcomeFailure maps the log's errors to the result: an unknown request
// id, a question or an outcome that does not fit the recorded answer.
func outcomeFailure(err error, prefix string) *FeedbackResult {
	switch {
	case errors.Is(err, decisionlog.ErrUnknownRequest):
		return feedbackFail(FeedbackUnknownRequest, prefix+"request_id", "%v: no answer was recorded under it (or it is older than the log's retention)", err)
	case errors.Is(err, decisionlog.ErrBadOutcome):
		return feedbackFail(FeedbackInvalid, prefix+"outcome", "%v", err)
	case errors.Is(err, decisionlog.ErrUnknownQuestion), errors.Is(err, decisionlog.ErrQuestionRequired):
		return feedbackFail(FeedbackInvalid, prefix+"question", "%v", err)
	}
	return feedbackFail(FeedbackLogError, "", "%v", err)
}
