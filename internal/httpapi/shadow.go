package httpapi

import (
	"net/http"
	"time"

	"system1/internal/outcomes"
	"system1/internal/systemone"
)

// handleShadow serves GET /v1/shadow: per served model, candidate and
// question signature, how the answers of a shadow rollout's candidate
// compare with the served ones recorded over a recent window, with a
// recommendation and its evidence (outcomes.ReportShadow). Query: window
// (a duration such as 24h, or days such as 7d; default 7d).
func (s *Server) handleShadow(w http.ResponseWriter, r *http.Request) {
	q, ok := knownParams(w, r, "/v1/shadow", "window")
	if !ok {
		return
	}
	window, ok := queryWindow(w, q, outcomes.DefaultShadowWindow)
	if !ok {
		return
	}
	if s.opt.DecisionLog == nil {
		writeError(w, http.StatusServiceUnavailable, systemone.Unavailable, "the decision log is off (decision_log in the configuration), so no shadow answers are kept")
		return
	}
	now := time.Now()
	rep, err := outcomes.ReportShadow(r.Context(), s.opt.DecisionLog, now.Add(-window), now)
	writeReport(w, r, rep, err)
}
