package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// handleSystemOne answers POST /v1/systemone: every question or none. A
// malformed request is a 422 listing every problem; a question system1
// will not stand behind (see answerHeaders) a 422 naming it, since the
// wire has no refusal; a question no node could answer a 503 naming it.
// As hosted Jev does, a request with Jev 1.14's images, an unknown
// top-level field or an unknown model is a 400 api_usage_error, the
// images before any engine is asked.
func (s *Server) handleSystemOne(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := readSystemOneBody(w, r)
	if !ok {
		return
	}
	p := systemone.ParseRequest(body)
	req, gate, coverage, ok := s.openSystemOne(w, r, p, p.Validate, "a System One request takes model, state and questions")
	if !ok {
		return
	}
	a, err := s.opt.Answer.Answer(r.Context(), answer.Request{Request: req, Face: decisionlog.FaceSystemOne, RequestID: RequestID(r.Context()), Start: start, Gate: gate, Coverage: coverage})
	if err != nil {
		noteFailure(r.Context(), err)
		writeFailure(w, err, p.Model)
		return
	}
	setCost(w.Header(), a.Cost) // a refused answer was paid for too
	out, status, refused := s.systemOneResult(r, p.Questions, req.Questions, gate, a)
	if out == nil {
		writeJSON(w, status, refused)
		return
	}
	s.answerNotes(w, r, req.Questions, a)
	if coverage > 0 {
		if why := setHeaders(w.Header(), req.Questions, a.Questions); len(why) > 0 {
			noteLog(r.Context(), "sets", why)
		}
	}
	out.Latency = time.Since(start)
	writeJSON(w, http.StatusOK, out.AppendJSON(make([]byte, 0, 512)))
}

// readSystemOneBody reads a System One route's body. As hosted Jev does,
// it refuses a multipart body unread with a 400: its parts are images. On
// any problem it writes the reply and ok is false.
func readSystemOneBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	if systemone.Multipart(r.Header.Get("Content-Type")) {
		writeJSON(w, http.StatusBadRequest, systemone.AppendUnsupported(nil, "", systemone.Unsupported{Multipart: true}))
		return nil, false
	}
	return readBody(w, r, writeError)
}

// openSystemOne is what both System One routes, the request and the
// batch, do with the body parsed into p before anything is asked. As
// hosted Jev does, it refuses a request with Jev 1.14's images, an unknown
// top-level field or a model no node serves (answer.Service.Admit) with a
// 400 api_usage_error; takes says what the route's body holds instead.
// Then the body is checked against the model's limits (validate: the
// route's own checks), and the headers read beside it: the corrections
// into req (answerHeaders), the gate, and the prediction sets' coverage.
// On any problem it writes the reply and ok is false.
func (s *Server) openSystemOne(w http.ResponseWriter, r *http.Request, p *systemone.Parsed, validate func(decision.Limits) []decision.Problem, takes string) (req decision.Request, gate answer.Gate, coverage float64, ok bool) {
	switch {
	case p.Images.Any():
		writeJSON(w, http.StatusBadRequest, systemone.AppendUnsupported(nil, p.Model, p.Images))
		return req, gate, 0, false
	case len(p.Unknown) > 0:
		writeError(w, http.StatusBadRequest, systemone.APIUsageError, unknownFields(p.Unknown, takes))
		return req, gate, 0, false
	}
	lim, err := s.opt.Answer.Admit(r.Context(), p.Model)
	if err != nil && p.Model != "" {
		writeError(w, http.StatusBadRequest, systemone.APIUsageError, unknownModel(p.Model))
		return req, gate, 0, false
	}
	if ps := validate(lim); len(ps) > 0 {
		writeInvalid(w, systemone.InBody, ps...)
		return req, gate, 0, false
	}
	req = p.Request
	gate, bad := answerHeaders(r, &req, lim)
	if bad == nil {
		coverage, bad = coverageHeader(r)
	}
	if bad != nil {
		writeInvalid(w, systemone.InHeader, *bad)
		return req, gate, 0, false
	}
	return req, gate, coverage, true
}

// systemOneResult is /v1/systemone's reply to answer a to the caller's
// questions, asked (with the none option where the gate added it) under
// gate: the response, its latency not yet set; or, where system1 will not stand
// behind some question's answer, out is nil and status and body are the
// 422 naming each such question, since the wire has no refusal.
func (s *Server) systemOneResult(r *http.Request, questions, asked []decision.Question, gate answer.Gate, a *answer.Answer) (out *systemone.Response, status int, body []byte) {
	if a.Refused() { // no 200 with a reading system1 will not stand behind
		noteLog(r.Context(), "refused", refusals(asked, a.Questions))
		return nil, http.StatusUnprocessableEntity, systemone.AppendValidationError(nil, systemone.InBody, a.Refusals(questions))
	}
	out = &systemone.Response{Model: a.Model, Questions: questions, Usage: systemone.Usage(a.Usage),
		Answers: make([]decision.Answer, 0, len(questions))}
	for i, q := range questions {
		ans, err := decision.NewAnswer(q, overOptions(gate, q, a.Questions[i].Dist), s.opt.Rounding)
		if err != nil { // the answer passed the core's checks, so this is a bug
			return nil, http.StatusInternalServerError, systemone.AppendError(nil, systemone.Internal, err.Error())
		}
		out.Answers = append(out.Answers, ans)
	}
	return out, http.StatusOK, nil
}

// answerNotes sets the headers both answering wires give an answer
// beside its body: the core's warnings (the header's names escaped and
// cut, the log line's in full), the steps applied, each question's label
// mass, what served the answers, whether every answer was calibrated, and
// what the decision cache made of the request.
func (s *Server) answerNotes(w http.ResponseWriter, r *http.Request, qs []decision.Question, a *answer.Answer) {
	if len(a.Warnings) > 0 {
		header, detail := make([]string, len(a.Warnings)), make([]string, len(a.Warnings))
		for j, wn := range a.Warnings {
			header[j] = wn.Text(headerName, headerNames)
			detail[j] = wn.Text(strconv.Quote, quotedList)
		}
		w.Header().Set("X-System1-Warnings", headerList(header))
		noteLog(r.Context(), "warnings", detail)
	}
	w.Header().Set(StepsHeader, stepsHeader(qs, a.Questions))
	w.Header().Set(LabelMassHeader, labelMassHeader(qs, a.Questions))
	w.Header().Set(ServedHeader, servedHeader(qs, a.Questions))
	if a.Stages != nil {
		w.Header().Set(EscalatedHeader, escalatedHeader(qs, a.Questions))
	}
	if a.Fits != nil { // true only when every answer was calibrated
		w.Header().Set("X-System1-Calibrated", strconv.FormatBool(a.Calibrated))
	}
	if a.Cache != "" {
		w.Header().Set(CacheHeader, a.Cache)
	}
}

// unknownFields is the 400's message for top-level fields the System One
// wire does not define: hosted Jev refuses them ("Invalid request."),
// and so does system1, naming them, rather than drop what a caller sent.
func unknownFields(fields []string, takes string) string {
	return "Invalid request: unknown top-level field(s) " + strings.Join(quoted(fields), ", ") + "; " + takes + "."
}

// unknownModel is the 400's message for a model no node serves, hosted
// Jev's words.
func unknownModel(model string) string {
	return "Unknown model: " + model + ". GET /v1/models lists the models this server serves."
}

// noteFailure puts the answer path's failure on the request's log line
// (error=) in the nodes' own words, addresses and all, which the reply
// gives the caller redacted: the operator's log keeps them.
func noteFailure(ctx context.Context, err error) {
	noteLog(ctx, "error", failureText(err))
}

// failureText is the answer path's failure as noteFailure logs it: each
// question's in the node's words.
func failureText(err error) string {
	var f *answer.Failure
	if !errors.As(err, &f) || len(f.Problems) == 0 {
		return err.Error()
	}
	why := make([]string, len(f.Problems))
	for i, p := range f.Problems {
		cause := p.Message
		if p.Err != nil {
			cause = p.Err.Error()
		}
		why[i] = fmt.Sprintf("question %q: %s", p.Question, cause)
	}
	return strings.Join(why, "; ")
}

// writeFailure writes the answer path's failure in the System One wire's
// shapes: a model no node serves (one that went away since it was
// checked) as hosted Jev's 400, the caller's error as a 422 with one
// problem per question, any other as a 503 naming each question and why,
// with Retry-After and Retry-After-Ms when a node asked for a pause. The messages are the
// core's, redacted there.
func writeFailure(w http.ResponseWriter, err error, model string) {
	status, retry, body := failureReply(err, model)
	if retry > 0 {
		decisionsapi.SetRetryAfter(w.Header(), retry)
	}
	writeJSON(w, status, body)
}

// failureReply is writeFailure's status, Retry-After (0 for none) and
// body.
func failureReply(err error, model string) (status int, retryAfter time.Duration, body []byte) {
	var f *answer.Failure
	if !errors.As(err, &f) {
		return http.StatusInternalServerError, 0, systemone.AppendError(nil, systemone.Internal, err.Error())
	}
	switch f.Class {
	case answer.UnknownModel:
		return http.StatusBadRequest, 0, systemone.AppendError(nil, systemone.APIUsageError, unknownModel(model))
	case answer.CallerError:
		problems := make([]decision.Problem, len(f.Problems))
		for i, p := range f.Problems {
			problems[i] = decision.Problem{Path: []string{"questions", p.Question}, Msg: p.Message, Type: "value_error"}
		}
		return http.StatusUnprocessableEntity, 0, systemone.AppendValidationError(nil, systemone.InBody, problems)
	}
	return http.StatusServiceUnavailable, f.RetryAfter, systemone.AppendError(nil, systemone.Unavailable, f.Error())
}

// quotedList writes names each quoted, comma-separated, for the log.
func quotedList(names []string) string { return strings.Join(quoted(names), ",") }

func quoted(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return q
}

// CacheHeader is the response header of /v1/systemone that says, with
// the decision cache on, what it made of the request: hit (answered from
// it), miss or bypass (answer.CacheHit, CacheMiss, CacheBypass). Absent
// when the cache is off.
const CacheHeader = "X-System1-Cache"

// CostHeader says what an answer cost, in US dollars, as a decimal
// ("0.000123"; "0" for a decision cache hit, which asked no engine): the
// answer path's Answer.Cost, on both answering wires and their batches.
// It is absent when the cost is not known, since some node that answered
// has no price (docs/http-api.md#cost).
const CostHeader = "X-System1-Cost"

// setCost sets CostHeader to cost, or leaves it out when cost is
// unknown (nil).
func setCost(h http.Header, cost *decision.USD) {
	if cost != nil {
		h.Set(CostHeader, cost.String())
	}
}

// StepsHeader is the response header of /v1/systemone naming every step
// applied to the engines' readings, in order, with its version:
// "debias=permute/4; temperature=v1/T=1.5" when every question had the
// same steps, else per question ("q1: debias=permute/4; q2: none"), and
// "none" when no step was applied. The body keeps Jev's shape.
const StepsHeader = "X-System1-Steps"

// stepsHeader writes the steps of every question for StepsHeader, with
// the header writer's escaping and bounds.
func stepsHeader(qs []decision.Question, as []answer.Question) string {
	names := make([]string, len(as))
	same := true
	for i, a := range as {
		names[i] = strings.Join(decision.StepNames(a.Steps), ", ")
		if names[i] == "" {
			names[i] = "none"
		}
		same = same && names[i] == names[0]
	}
	switch {
	case same && len(as) > 0 && len(as[0].Steps) == 0:
		return "none"
	case same && len(as) > 0:
		return headerList(decision.StepNames(as[0].Steps))
	}
	for i := range names {
		names[i] = headerName(qs[i].ID) + ": " + headerText(names[i], maxHeaderItem)
	}
	return headerList(names)
}

// ServedHeader is the response header of /v1/systemone naming what served
// the answers: the node, the model and the fingerprint of its build
// (docs/fingerprints.md), "node=n1 model=m fingerprint=3f2a..." when one
// build served every question, else per question ("q1: node=n1 ...; q2:
// node=n2 ..."). The body keeps Jev's shape.
const ServedHeader = "X-System1-Served"

// servedHeader writes what served every question for ServedHeader, with
// the header writer's escaping and bounds.
func servedHeader(qs []decision.Question, as []answer.Question) string {
	items := make([]string, len(as))
	same := true
	for i, a := range as {
		items[i] = a.Served(headerName)
		same = same && items[i] == items[0]
	}
	if same && len(items) > 0 {
		return escapeCut(items[0], maxHeaderValue, false) // its names escaped already
	}
	for i := range items {
		items[i] = headerName(qs[i].ID) + ": " + items[i]
	}
	return headerList(items)
}

// EscalatedHeader is the response header of both wires saying, for a
// cascade's answer (docs/cascades.md), per question whether it was
// escalated past the first stage: "q1=false; q2=true". Which stage
// answered is in ServedHeader's model. Absent for a model that is not a
// cascade.
const EscalatedHeader = "X-System1-Escalated"

// escalatedHeader writes every question's escalation for EscalatedHeader,
// bounded by the header writer.
func escalatedHeader(qs []decision.Question, as []answer.Question) string {
	items := make([]string, len(as))
	for i, a := range as {
		items[i] = headerName(qs[i].ID) + "=" + strconv.FormatBool(a.Escalated())
	}
	return headerList(items)
}

// LabelMassHeader is the response header of /v1/systemone giving, per
// question, the probability the engine put on the option labels at all
// ("q1=0.93; q2=unknown"): low means no option seemed to fit; unknown
// where the engine reports after its constraint or a System One upstream
// answered.
const LabelMassHeader = "X-System1-Label-Mass"

// labelMassHeader writes every question's label mass for
// LabelMassHeader, bounded by the header writer.
func labelMassHeader(qs []decision.Question, as []answer.Question) string {
	items := make([]string, len(as))
	for i, a := range as {
		v := "unknown"
		if m := a.LabelMass; !math.IsNaN(m) {
			v = decision.FormatLabelMass(m) // significant digits: 0.000665, not 0.001
		}
		items[i] = headerName(qs[i].ID) + "=" + v
	}
	return headerList(items)
}

// DebiasHeader is the request header that chooses order debiasing for one
// /v1/systemone request: permute or off; absent is the configured one.
const DebiasHeader = "X-System1-Debias"
