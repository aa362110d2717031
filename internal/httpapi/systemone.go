package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
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
		writeJSON(w, http.StatusUnprocessableEntity, systemone.AppendValidationError(nil, ps))
		return
	}
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
	out := systemone.Response{Model: res.Model, Questions: p.Questions}
	var warnings, detail []string // for the header, and in full for the log
	calibrated := true
	for i, q := range p.Questions {
		a := res.Questions[i]
		d := a.Dist
		if s.opt.Fits != nil {
			var ok bool
			if d, ok = s.opt.Fits.Apply("", a.Model, q.Kind, d); !ok {
				calibrated = false
				const f = "%s: no calibration fit for model %s, %s over %d options; reported as the engine gave it"
				warnings = append(warnings, fmt.Sprintf(f, headerName(q.ID), headerName(a.Model), q.Kind, len(d)))
				detail = append(detail, fmt.Sprintf(f, strconv.Quote(q.ID), strconv.Quote(a.Model), q.Kind, len(d)))
			}
		}
		ans, err := decision.NewAnswer(q, d, s.opt.Rounding)
		if err != nil { // the engine's reading passed every check, so this is a bug
			writeError(w, http.StatusInternalServerError, systemone.Internal, err.Error())
			return
		}
		out.Answers = append(out.Answers, ans)
		out.Usage.InputTokens += a.InputTokens
		out.Usage.OutputTokens += a.OutputTokens
		out.Usage.Estimated = out.Usage.Estimated || a.Estimated
		if len(a.Missing) > 0 {
			const f = "%s: options %s were not in the engine's top log-probabilities; reported 0"
			warnings = append(warnings, fmt.Sprintf(f, headerName(q.ID), headerNames(a.Missing)))
			quoted := make([]string, len(a.Missing))
			for i, m := range a.Missing {
				quoted[i] = strconv.Quote(m)
			}
			detail = append(detail, fmt.Sprintf(f, strconv.Quote(q.ID), strings.Join(quoted, ",")))
		}
	}
	if len(warnings) > 0 {
		w.Header().Set("X-System1-Warnings", headerList(warnings))
		noteLog(r.Context(), "warnings", detail)
	}
	if s.opt.Fits != nil { // true only when every answer was calibrated
		w.Header().Set("X-System1-Calibrated", strconv.FormatBool(calibrated))
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
		var f *engine.Failure
		if !errors.As(a.Err, &f) || f.Kind != engine.Rejected {
			rejected = false
		}
		if errors.As(a.Err, &f) && f.Kind == engine.RateLimited {
			wait = max(wait, f.RetryAfter)
		}
	}
	msg := strings.Join(reasons, "; ")
	if rejected { // a 422 in the shape of every other: one problem per question
		writeJSON(w, http.StatusUnprocessableEntity, systemone.AppendValidationError(nil, problems))
		return
	}
	if wait > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfterSeconds(wait)))
	}
	slices.Sort(failed)
	writeError(w, http.StatusServiceUnavailable, systemone.Unavailable,
		fmt.Sprintf("no answer for question(s) %s: %s", strings.Join(failed, ", "), msg))
}
