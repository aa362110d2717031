package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fleet"
	"system1/internal/redact"
	"system1/internal/systemone"
)

// handleSystemOne answers POST /v1/systemone: every question or none. A
// malformed request is a 422 listing every problem; a model no node serves
// and a question no node could answer are 503s that name them.
func (s *Server) handleSystemOne(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	p := systemone.ParseRequest(body)
	lim, errModel := s.limits(r, p.Model)
	if ps := p.Validate(lim); len(ps) > 0 {
		writeInvalid(w, systemone.InBody, ps...)
		return
	}
	debias, bad := choiceHeader(r, DebiasHeader, decision.ValidDebias, "permute or off")
	if bad != nil {
		writeInvalid(w, systemone.InHeader, *bad)
		return
	}
	p.Request.Debias = debias
	prior, bad := choiceHeader(r, PriorHeader, decision.ValidPrior, "off, batch or content_free")
	if bad != nil {
		writeInvalid(w, systemone.InHeader, *bad)
		return
	}
	p.Request.Prior = prior
	if errModel != nil {
		writeError(w, http.StatusServiceUnavailable, systemone.Unavailable,
			fmt.Sprintf("model %q is not served by any node of this server", p.Model))
		return
	}
	res, err := s.opt.Router.Decide(r.Context(), p.Request)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, systemone.Unavailable, redact.Text(err.Error()))
		return
	}
	if failed := res.Unanswered(p.Request); len(failed) > 0 {
		s.writeUnanswered(w, p.Request, res, failed)
		return
	}
	fits := s.fits()
	rep := res.Report(p.Request, fits, "")
	res.Record(s.opt.Recorder, p.Request, rep, fleet.Asked{Face: decisionlog.FaceSystemOne, RequestID: RequestID(r.Context()), Start: start})
	out := systemone.Response{Model: res.Model, Questions: p.Questions,
		Usage: systemone.Usage{InputTokens: rep.Usage.InputTokens, OutputTokens: rep.Usage.OutputTokens, Estimated: rep.Usage.Estimated}}
	for i, q := range p.Questions {
		ans, err := decision.NewAnswer(q, rep.Dists[i], s.opt.Rounding)
		if err != nil { // the engine's reading passed every check, so this is a bug
			writeError(w, http.StatusInternalServerError, systemone.Internal, err.Error())
			return
		}
		out.Answers = append(out.Answers, ans)
	}
	if len(rep.Warnings) > 0 {
		// The core's words; the header's names escaped and cut, the log's
		// in full.
		header, detail := make([]string, len(rep.Warnings)), make([]string, len(rep.Warnings))
		for j, wn := range rep.Warnings {
			header[j] = wn.Text(headerName, headerNames)
			detail[j] = wn.Text(strconv.Quote, quotedList)
		}
		w.Header().Set("X-System1-Warnings", headerList(header))
		noteLog(r.Context(), "warnings", detail)
	}
	w.Header().Set(StepsHeader, stepsHeader(p.Questions, rep.Steps))
	w.Header().Set(LabelMassHeader, labelMassHeader(p.Questions, rep.LabelMass))
	if fits != nil { // true only when every answer was calibrated
		w.Header().Set("X-System1-Calibrated", strconv.FormatBool(rep.Calibrated))
	}
	out.Latency = time.Since(start)
	writeJSON(w, http.StatusOK, out.AppendJSON(make([]byte, 0, 512)))
}

// limits returns the request limits for a model, refreshing the nodes'
// model lists once when no node is known to serve it.
func (s *Server) limits(r *http.Request, model string) (decision.Limits, error) {
	lim, err := s.opt.Router.Limits(model)
	if errors.Is(err, fleet.ErrUnknownModel) && model != "" {
		s.opt.Router.Refresh(r.Context())
		lim, err = s.opt.Router.Limits(model)
	}
	if err != nil {
		return decision.DefaultLimits(), err
	}
	return lim, nil
}

// writeUnanswered explains why questions got no answer: a 422 when the
// engines refused the request itself, else a 503 naming each question and
// its last failure, with Retry-After when every node asked for a pause.
func (s *Server) writeUnanswered(w http.ResponseWriter, req decision.Request, res *fleet.Result, failed []string) {
	var reasons []string
	var problems []decision.Problem
	rejected, wait := true, time.Duration(0)
	for i, a := range res.Questions {
		if a.Err == nil {
			continue
		}
		// Engines' errors name their URLs and echo upstream text: no caller
		// reads a node's address.
		why := redact.Text(a.Err.Error())
		reasons = append(reasons, fmt.Sprintf("question %q: %s", req.Questions[i].ID, why))
		problems = append(problems, decision.Problem{Path: []string{"questions", req.Questions[i].ID}, Msg: why, Type: "value_error"})
		class, pause := fleet.Classify(a.Err)
		rejected = rejected && class == fleet.CallerError
		wait = max(wait, pause)
	}
	msg := strings.Join(reasons, "; ")
	if rejected { // a 422 in the shape of every other: one problem per question
		writeInvalid(w, systemone.InBody, problems...)
		return
	}
	if wait > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfterSeconds(wait)))
	}
	slices.Sort(failed)
	writeError(w, http.StatusServiceUnavailable, systemone.Unavailable,
		fmt.Sprintf("no answer for question(s) %s: %s", strings.Join(failed, ", "), msg))
}

// quotedList writes names each quoted, comma-separated, for the log.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ",")
}

// StepsHeader is the response header of /v1/systemone naming every step
// applied to the engines' readings, in order, with its version:
// "debias=permute/4; temperature=v1/T=1.5" when every question had the
// same steps, else per question ("q1: debias=permute/4; q2: none"), and
// "none" when no step was applied. The body keeps Jev's shape.
const StepsHeader = "X-System1-Steps"

// stepsHeader writes the steps of every question for StepsHeader, with
// the header writer's escaping and bounds.
func stepsHeader(qs []decision.Question, steps [][]decision.Step) string {
	names := make([]string, len(steps))
	same := true
	for i, st := range steps {
		names[i] = strings.Join(decision.StepNames(st), ", ")
		if names[i] == "" {
			names[i] = "none"
		}
		same = same && names[i] == names[0]
	}
	switch {
	case same && len(steps) > 0 && len(steps[0]) == 0:
		return "none"
	case same && len(steps) > 0:
		return headerList(decision.StepNames(steps[0]))
	}
	items := make([]string, len(steps))
	for i := range steps {
		items[i] = headerName(qs[i].ID) + ": " + headerText(names[i], maxHeaderItem)
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
func labelMassHeader(qs []decision.Question, mass []float64) string {
	items := make([]string, len(mass))
	for i, m := range mass {
		v := "unknown"
		if !math.IsNaN(m) {
			v = strconv.FormatFloat(m, 'f', 3, 64)
		}
		items[i] = headerName(qs[i].ID) + "=" + v
	}
	return headerList(items)
}

// DebiasHeader is the request header that chooses order debiasing for one
// /v1/systemone request: permute or off; absent is the configured one.
const DebiasHeader = "X-System1-Debias"
