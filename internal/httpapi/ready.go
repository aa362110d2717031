package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
)

// NotReady is one condition of readiness a server does not meet (GET
// /readyz).
type NotReady struct {
	// Check names the condition: CheckDecisionLog, CheckNodes or
	// CheckDraining.
	Check string `json:"check" jsonschema:"decision_log, nodes or draining."`
	// Detail says what is missing, naming models and nodes; with auth on,
	// only a caller with a key gets it, as /health's nodes.
	Detail string `json:"detail,omitempty" jsonschema:"What is missing, naming models and nodes; with auth on, only to a caller with a key."`
}

// The conditions of readiness.
const (
	// CheckDecisionLog: the configured decision log is not open.
	CheckDecisionLog = "decision_log"
	// CheckNodes: a configured model has no node that answered a health
	// probe yet.
	CheckNodes = "nodes"
	// CheckDraining: the server is shutting down.
	CheckDraining = "draining"
)

// Readiness statuses, GET /readyz's status.
const (
	StatusReady    = "ready"
	StatusNotReady = "not_ready"
	StatusDraining = "draining"
)

// Readiness is GET /readyz's body.
type Readiness struct {
	Status string `json:"status" jsonschema:"ready (200); not_ready or draining (503)."`
	// NotReady lists the conditions not met, none when ready.
	NotReady []NotReady `json:"not_ready,omitempty" jsonschema:"The conditions not met."`
}

// handleLivez answers GET /livez: 200 while the process serves, whatever
// its nodes and decision log do, so that a supervisor restarts only a
// process that no longer answers at all.
func (s *Server) handleLivez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// handleReadyz answers GET /readyz: 200 when the server should be sent
// traffic, else 503 saying which conditions are not met (Options.Ready),
// draining first.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	body := Readiness{Status: StatusReady}
	status := http.StatusOK
	if s.opt.Ready != nil {
		body.NotReady = s.opt.Ready()
	}
	if len(body.NotReady) > 0 {
		status, body.Status = http.StatusServiceUnavailable, StatusNotReady
		if slices.ContainsFunc(body.NotReady, func(n NotReady) bool { return n.Check == CheckDraining }) {
			body.Status = StatusDraining
		}
		if !s.showDetail(r) {
			body.NotReady = slices.Clone(body.NotReady)
			for i := range body.NotReady {
				body.NotReady[i].Detail = ""
			}
		}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, b)
}
