package httpapi

import (
	"cmp"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/decisionsapi"
	"system1/internal/systemone"
)

// handleDecisions answers POST /v1/decisions, OpenAI's Decisions wire,
// over the same answer path as /v1/systemone: the request read by
// package decisionsapi (a 400 naming every problem by its JSON path, an
// image refused as unsupported input), the gate's headers read as on the
// System One wire, the answers written in question order with each
// question's name, and a question system1 will not stand behind answered
// with a refusal while the others are answered. Errors are OpenAI's
// envelope; x-request-id is on every reply (decisionsWire).
func (s *Server) handleDecisions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := readBody(w, r, writeDecisionsAPIError)
	if !ok {
		return
	}
	p := decisionsapi.ParseRequest(body)
	lim, err := s.opt.Answer.Admit(r.Context(), p.Model)
	if err != nil && p.Model != "" {
		writeDecisionsError(w, decisionsapi.ModelNotFound(p.Model))
		return
	}
	if e := p.Validate(lim); e != nil {
		writeDecisionsError(w, e)
		return
	}
	req := p.Request
	gate, bad := answerHeaders(r, &req, lim)
	if bad != nil {
		writeDecisionsError(w, decisionsapi.InvalidParam(bad.Path[0], bad.Msg))
		return
	}
	a, err := s.opt.Answer.Answer(r.Context(), answer.Request{Request: req, Face: decisionlog.FaceDecisions, RequestID: RequestID(r.Context()),
		Start: start, Gate: gate})
	if err != nil {
		noteFailure(r.Context(), err)
		writeDecisionsError(w, decisionsFailure(err, p))
		return
	}
	out := decisionsapi.Response{Model: cmp.Or(a.Model, p.Model), Request: p, Dists: make([]decision.Distribution, len(p.Questions)),
		Refused: make([]bool, len(p.Questions)),
		Usage:   decisionsapi.Usage{InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens}}
	for i, q := range p.Questions {
		out.Refused[i] = a.Questions[i].Refusal != nil
		if d := a.Questions[i].Dist; d != nil {
			out.Dists[i] = overOptions(gate, q, d)
		}
	}
	b, err := out.AppendJSON(make([]byte, 0, 512))
	if err != nil { // every answer passed the core's checks, so this is a bug
		writeDecisionsError(w, decisionsapi.Internal(err.Error()))
		return
	}
	s.answerNotes(w, r, req.Questions, a)
	setCost(w.Header(), a.Cost)
	if a.Refused() {
		w.Header().Set(RefusedHeader, refusedHeader(req.Questions, a.Questions))
		noteLog(r.Context(), "refused", refusals(req.Questions, a.Questions))
	}
	writeJSON(w, http.StatusOK, b)
}

// writeDecisionsError writes an error in OpenAI's envelope, with the
// pause it asks for.
func writeDecisionsError(w http.ResponseWriter, e *decisionsapi.Error) {
	e.SetHeaders(w.Header())
	writeJSON(w, e.Status, e.AppendJSON(nil))
}

// writeDecisionsAPIError is the errorWriter of the Decisions routes: what
// every API route may answer outside its handler (a key missing or
// wrong, a rate limit, a body it cannot take, a wrong method), in
// OpenAI's envelope.
func writeDecisionsAPIError(w http.ResponseWriter, status int, typ, msg string) {
	writeDecisionsError(w, openAIError(status, typ, msg))
}

// writeModelsAPIError is the errorWriter of GET /v1/models, which both
// wires' clients call: OpenAI's envelope, with the detail Jev's clients
// read beside its error.
func writeModelsAPIError(w http.ResponseWriter, status int, typ, msg string) {
	e := openAIError(status, typ, msg)
	e.SetHeaders(w.Header())
	detail := append(systemone.AppendErrorDetail([]byte(`{"detail":`), typ, msg), '}')
	writeJSON(w, status, joinObjects(e.AppendJSON(nil), detail))
}

// joinObjects writes the members of two JSON objects as one object: an
// envelope of one wire with the other's beside it.
func joinObjects(a, b []byte) []byte {
	return append(append(a[:len(a)-1:len(a)-1], ','), b[1:]...)
}

// openAIError is an error every API route may answer before its handler,
// in OpenAI's words.
func openAIError(status int, typ, msg string) *decisionsapi.Error {
	switch typ {
	case systemone.Authentication:
		return decisionsapi.Unauthorized(msg)
	case systemone.Permission:
		return decisionsapi.Forbidden(msg)
	case systemone.RateLimit: // Retry-After and Retry-After-Ms are set by then
		return decisionsapi.TooManyRequests(msg, 0)
	case systemone.InsufficientQuota: // Retry-After is set by then
		return decisionsapi.InsufficientQuota(msg)
	}
	return &decisionsapi.Error{Status: status, Type: decisionsapi.TypeInvalidRequest, Message: msg}
}

// openAIUnmatched answers a request under an OpenAI route that no route
// serves as OpenAI does, in its envelope: a known path asked with another
// method is a 405 with Allow, anything else a 404. Under /v1/models,
// which Jev's clients call too, FastAPI's detail is beside it.
func openAIUnmatched(mux *http.ServeMux, jev bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decisionsWire.start(w, r)
		what := " (" + r.Method + " " + r.URL.Path + ")"
		e := &decisionsapi.Error{Status: http.StatusNotFound, Type: decisionsapi.TypeInvalidRequest, Message: "Invalid URL" + what}
		detail := systemone.NotFoundBody
		if methods := allowed(mux, r); len(methods) > 0 {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			e.Status, e.Message = http.StatusMethodNotAllowed, "Invalid method for URL"+what+"; it takes "+strings.Join(methods, ", ")
			detail = systemone.MethodNotAllowedBody
		}
		b := e.AppendJSON(nil)
		if jev {
			b = joinObjects(b, detail)
		}
		writeJSON(w, e.Status, b)
	})
}

// decisionsFailure is the answer path's failure in OpenAI's envelope: a
// model no node serves is a 404; the caller's error a 400 naming the
// first question (an engine that cannot serve decisions, its 501, is a
// 400 naming the model: the SDKs retry a 5xx, and this will not change;
// a prompt over the model's context is context_length_exceeded, naming
// input);
// anything else a 503, with the pause a node asked for.
func decisionsFailure(err error, p *decisionsapi.Parsed) *decisionsapi.Error {
	var f *answer.Failure
	if !errors.As(err, &f) {
		return decisionsapi.Internal(err.Error())
	}
	switch f.Class {
	case answer.UnknownModel:
		return decisionsapi.ModelNotFound(p.Model)
	case answer.CallerError:
		index := make(map[string]int, len(p.Questions))
		for i, q := range p.Questions {
			index[q.ID] = i
		}
		ps := make([]decisionsapi.Problem, len(f.Problems))
		notServed, tooLong := len(f.Problems) > 0, false
		for i, pr := range f.Problems {
			ps[i] = decisionsapi.Problem{Param: "questions[" + strconv.Itoa(index[pr.Question]) + "]", Message: pr.Message}
			notServed = notServed && pr.Status == http.StatusNotImplemented
			tooLong = tooLong || pr.ContextTooLong
		}
		switch {
		case notServed:
			return decisionsapi.NotServed(decisionsapi.Invalid(ps).Message)
		case tooLong: // the input is what does not fit, whichever question found it
			return decisionsapi.ContextLengthExceeded(decisionsapi.Invalid(ps).Message)
		}
		return decisionsapi.Invalid(ps)
	}
	return decisionsapi.ServiceUnavailable(f.Error(), f.RetryAfter)
}

// refusals lists each refused question and why, for the log line.
func refusals(qs []decision.Question, as []answer.Question) []string {
	var out []string
	for i, a := range as {
		if a.Refusal != nil {
			out = append(out, strconv.Quote(qs[i].ID)+": "+a.Refusal.String())
		}
	}
	return out
}
