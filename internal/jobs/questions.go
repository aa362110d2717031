package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"system1/internal/decision"
	"system1/internal/jsonx"
	"system1/internal/systemone"
)

// utf8BOM is a UTF-8 byte order mark, as spreadsheet programs and
// Windows editors begin a file with: no part of its first row or object.
var utf8BOM = []byte("\xef\xbb\xbf")

// ErrNoModel is ParseQuestions' error when neither the caller nor the
// questions file names the model.
var ErrNoModel = errors.New("model: none given, neither as an option nor in the questions file")

// ParseQuestions reads a job's questions file: a Jev questions map
// ({"q1": {"type": ...}, ...}) or a whole Jev body without its state
// ({"model": ..., "questions": {...}}). model, when not empty, is the
// job's model, else the body's. The questions are checked once, here, by
// the wire's own parser against lim (decision.DefaultLimits when the
// decider's are not known), so that a bad question is one error before the
// run rather than one per row.
func ParseQuestions(data []byte, model string, lim decision.Limits) (decision.Request, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if !json.Valid(data) {
		return decision.Request{}, errors.New("the questions file is not valid JSON")
	}
	top, err := jsonx.Members(data)
	if err != nil {
		return decision.Request{}, fmt.Errorf("the questions file must be a JSON object: %w", err)
	}
	questions := json.RawMessage(data)
	if q, ok := jsonx.Lookup(top, "questions"); ok && !isQuestion(q) {
		questions = q
		if raw, ok := jsonx.Lookup(top, "model"); ok && model == "" {
			if err := json.Unmarshal(raw, &model); err != nil {
				return decision.Request{}, errors.New("model: a string is required")
			}
		}
	}
	if model == "" {
		return decision.Request{}, ErrNoModel
	}
	m, _ := json.Marshal(model)
	// A placeholder state: the rows bring theirs.
	body := fmt.Appendf(nil, `{"model":%s,"state":"","questions":%s}`, m, questions)
	p := systemone.ParseRequest(body)
	if ps := p.Validate(lim); len(ps) > 0 {
		return decision.Request{}, fmt.Errorf("the questions file: %s", systemone.ValidationMessage(systemone.InBody, ps))
	}
	req := p.Request
	req.State = nil
	return req, nil
}

// isQuestion reports whether raw reads as one question (an object with a
// string "type"), so that a questions map holding a question whose id is
// "questions" is not taken for a body.
func isQuestion(raw json.RawMessage) bool {
	ms, err := jsonx.Members(raw)
	if err != nil {
		return false
	}
	t, ok := jsonx.Lookup(ms, "type")
	return ok && jsonx.Kind(t) == "string"
}
