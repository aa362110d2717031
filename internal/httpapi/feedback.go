package httpapi

import (
	"net/http"

	"system1/internal/decision"
	"system1/internal/outcomes"
	"system1/internal/systemone"
)

// handleFeedback serves POST /v1/feedback: one outcome
// {"request_id","question","outcome"} or a batch {"outcomes":[...]},
// recorded by the gateway's feedback service, all or none. 200 with the
// outcomes recorded; 422 naming the field at fault (outcome for an
// outcome that is not one of the question's options, question for a
// question the request does not have or that was needed); 404 for a
// request id no answer was recorded under; 503 when the log is off.
func (s *Server) handleFeedback(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeError)
	if !ok {
		return
	}
	items, res := outcomes.ParseFeedback(body)
	if res == nil {
		res = s.opt.Feedback.Record(r.Context(), items)
	}
	if e := res.Error; e != nil {
		switch e.Code {
		case outcomes.FeedbackInvalid:
			writeInvalid(w, systemone.InBody, decision.Problem{Path: e.Path(), Msg: e.Message, Type: e.Type})
		case outcomes.FeedbackUnknownRequest:
			writeError(w, http.StatusNotFound, systemone.NotFound, e.Message)
		case outcomes.FeedbackLogError:
			writeLogFailure(w, r, "the decision log", e.Message)
		default:
			writeError(w, http.StatusServiceUnavailable, systemone.Unavailable, e.Message)
		}
		return
	}
	writeOK(w, res)
}
