package answer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fleet"
	"system1/internal/redact"
)

// Class is what a failure means to the caller. Every face maps a class
// the same way: the caller's error as a refusal of the request (422 on
// /v1/systemone, invalid_request on decide), the others as no answer.
type Class string

// The classes of a failure.
const (
	// CallerError: the engine refused the request itself (HTTP 400, 413,
	// 422, a context too long, more options than any node takes, over
	// the engine-call budget), so no other node or link is asked to
	// repeat it.
	CallerError Class = "caller_error"
	// TimedOut: no answer within the time allowed.
	TimedOut Class = "timeout"
	// Malformed: the answer was not a usable reading.
	Malformed Class = "malformed"
	// NoAnswer: the nodes were down, busy, cooling down or refusing.
	NoAnswer Class = "no_answer"
	// UnknownModel: no node serves the model asked for.
	UnknownModel Class = "unknown_model"
)

// Classify returns the class of a failure, and the longest pause a node
// asked for when it was rate limited (else 0).
func Classify(err error) (Class, time.Duration) {
	var f *engine.Failure
	switch {
	case errors.Is(err, fleet.ErrUnknownModel):
		return UnknownModel, 0
	case errors.As(err, &f):
	case errors.Is(err, context.DeadlineExceeded):
		return TimedOut, 0
	default:
		return NoAnswer, 0
	}
	switch f.Kind {
	case engine.Rejected:
		return CallerError, 0
	case engine.Timeout:
		return TimedOut, 0
	case engine.Malformed:
		return Malformed, 0
	case engine.RateLimited:
		return NoAnswer, f.RetryAfter
	}
	return NoAnswer, 0
}

// Cause is a failure in the node's own words: without the node's name
// and the failure's class.
func Cause(err error) error {
	var f *engine.Failure
	if errors.As(err, &f) {
		return f.Err
	}
	return err
}

// Failure is a request not answered. A face maps it to its own status by
// Class alone, with RetryAfter where it has a word for it; its messages
// are ready for the caller (see Options.Local).
type Failure struct {
	// Class is CallerError when every question that failed was refused
	// as the caller's error, UnknownModel when no node serves the model,
	// else NoAnswer.
	Class Class
	// RetryAfter is the longest pause a node asked for (a 429's
	// Retry-After); 0 when none did.
	RetryAfter time.Duration
	// Problems are the questions not answered, in question order; none
	// for UnknownModel.
	Problems []Problem
	msg      string
}

// Problem is one question not answered.
type Problem struct {
	// Question is the question's id.
	Question string
	// Class is the question's own: CallerError, TimedOut, Malformed or
	// NoAnswer.
	Class Class
	// Message is the failure as the caller reads it, naming the node;
	// Cause is in the node's own words, without the node's name and the
	// class.
	Message, Cause string
	// Attempts are every try of the question, in order.
	Attempts []fleet.Attempt
	// Status is the HTTP status the node refused it with, 0 for none: a
	// face may say more of some (an engine's 501, no decision support).
	Status int
	// ContextTooLong is set when the node refused the prompt as longer
	// than the model's context, which a face may name as such.
	ContextTooLong bool
	// Err is the failure as the node gave it, addresses and all: for the
	// operator's log, never for a caller.
	Err error
}

// Error is the failure in one line: the model no node serves, or each
// question not answered and why.
func (f *Failure) Error() string { return f.msg }

// text is a node's text as the service's caller may read it.
func (s *Service) text(msg string) string {
	if s.opt.Local {
		return msg
	}
	return redact.Text(msg)
}

// refused is the failure of a request the fleet refused as a whole: a
// model that no node serves.
func (s *Service) refused(model string, err error) *Failure {
	class, _ := Classify(err)
	msg := s.text(err.Error())
	if class == UnknownModel {
		msg = fmt.Sprintf("model %q is not served by any node of this server", model)
	}
	return &Failure{Class: class, msg: msg}
}

// unanswered is the failure of a request some questions of which no node
// answered, nil when every one was.
func (s *Service) unanswered(req decision.Request, res *fleet.Result) *Failure {
	var ps []Problem
	for i, a := range res.Questions {
		if a.Err == nil {
			continue
		}
		class, _ := Classify(a.Err)
		p := Problem{Question: req.Questions[i].ID, Class: class, Message: s.text(a.Err.Error()),
			Cause: s.text(Cause(a.Err).Error()), Attempts: a.Attempts, Err: a.Err}
		var f *engine.Failure
		if errors.As(a.Err, &f) {
			p.Status, p.ContextTooLong = f.Status, f.ContextTooLong
		}
		ps = append(ps, p)
	}
	return failure(ps)
}

// check holds every distribution answered to the domain's rules (one
// probability per option, each in [0,1], summing to 1) before anything
// is recorded, whatever the node: one that fails is malformed. A question
// the node declined outright has none to check.
func (s *Service) check(req decision.Request, declined []*Refusal, a *Answer) *Failure {
	var ps []Problem
	for i, q := range req.Questions {
		got := a.Questions[i]
		if got.Dist == nil && declined[i] != nil {
			continue
		}
		if err := got.Dist.Check(len(q.Options)); err != nil {
			err = fmt.Errorf("node %s: the answer failed the checks: %w", got.Node, err)
			ps = append(ps, Problem{Question: q.ID, Class: Malformed, Message: err.Error(), Cause: err.Error(), Attempts: got.Attempts, Err: err})
		}
	}
	return failure(ps)
}

// failure sums up problems, nil for none: the caller's error when every
// one is, else no answer, waiting as long as the longest pause asked for.
func failure(ps []Problem) *Failure {
	if len(ps) == 0 {
		return nil
	}
	f := &Failure{Class: CallerError, Problems: ps}
	ids := make([]string, len(ps))
	reasons := make([]string, len(ps))
	for i, p := range ps {
		if p.Class != CallerError {
			f.Class = NoAnswer
		}
		_, pause := Classify(p.Err)
		f.RetryAfter = max(f.RetryAfter, pause)
		ids[i] = p.Question
		reasons[i] = fmt.Sprintf("question %q: %s", p.Question, p.Message)
	}
	slices.Sort(ids)
	f.msg = fmt.Sprintf("no answer for question(s) %s: %s", strings.Join(ids, ", "), strings.Join(reasons, "; "))
	return f
}
