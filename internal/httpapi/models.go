package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"system1/internal/decisionsapi"
	"system1/internal/fleet"
	"system1/internal/redact"
	"system1/internal/systemone"
)

// handleModels answers GET /v1/models with the union of the nodes' models
// and the configured aliases, in the wire's model-list shapes, each with
// what it can be asked on the wire that reads that shape.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, systemone.AppendModels(nil, s.models()))
}

// handleModel answers GET /v1/models/{id}, OpenAI's models.retrieve: the
// model as the list's data has it, or a 404 model_not_found.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, m := range s.models() {
		if m.ID == id {
			writeJSON(w, http.StatusOK, systemone.AppendModel(nil, m))
			return
		}
	}
	writeDecisionsError(w, decisionsapi.ModelNotFound(id))
}

// models are the models GET /v1/models lists.
func (s *Server) models() []systemone.Model {
	var models []systemone.Model
	listed := s.opt.Answer.Models()
	seen := make(map[string]time.Time, len(listed))
	for _, m := range listed {
		seen[m.ID] = m.Seen
	}
	for _, m := range listed {
		// A local model has no release date, so this is the date this
		// server first listed it; a cascade's, the date its last stage
		// was (the fleet dates no cascade: the zero time read as the
		// year 1).
		released := m.Seen
		desc := "served by " + m.Via
		switch {
		case m.Stages != nil:
			desc = "cascade of " + strings.Join(m.Stages, ", ") + ", asked in turn per question"
			for _, st := range m.Stages {
				if seen[st].After(released) {
					released = seen[st]
				}
			}
		case m.AliasOf != "":
			desc = "alias of " + m.AliasOf + ", " + desc
		}
		model := systemone.Model{ID: m.ID, Description: desc, Released: released}
		if m.Limits != nil {
			jev, oai := systemone.Capabilities(*m.Limits), decisionsapi.Capabilities(*m.Limits)
			model.Capabilities, model.DataCapabilities = &jev, &oai
		}
		models = append(models, model)
	}
	return models
}

// handleHealth answers GET /health: {"status":"ok"} while the process
// serves, with each node's state (the fleet's one view of it, the same
// system1_health lists) and nodes_status, the fleet's status in a word.
// With auth on, the nodes (names, models, cooldown reasons) are shown only
// to a caller with a key (showDetail): anyone else gets the status alone.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	body := struct {
		Status  string `json:"status"`
		Version string `json:"version,omitempty"`
		Auth    bool   `json:"auth"`
		// NodesStatus is fleet.FleetStatus of the nodes: ok, degraded or
		// down.
		NodesStatus string        `json:"nodes_status,omitempty"`
		Nodes       []fleet.State `json:"nodes,omitempty"`
		// Paused is the decide gateway's pause switch, with what is wrong
		// when its state file is unreadable (which reads as paused).
		Paused       *bool  `json:"paused,omitempty"`
		PauseProblem string `json:"pause_problem,omitempty"`
	}{Status: "ok", Auth: s.AuthOn()}
	if s.showDetail(r) {
		body.Version = s.opt.Version
		states := s.opt.Answer.States()
		for i := range states {
			states[i] = states[i].Redacted()
		}
		body.Nodes, body.NodesStatus = states, fleet.FleetStatus(states)
		if s.opt.Decide != nil {
			paused, problem := s.opt.Decide.Paused()
			body.Paused, body.PauseProblem = &paused, redact.Text(problem)
		}
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

// showDetail reports whether a caller of a route that needs no key
// (/health, /readyz) may see the detail that names nodes and models:
// anyone with auth off, else a caller with a key. A wrong key counts
// against the address's allowance like anywhere else, so that the detail
// cannot be used to test guesses.
func (s *Server) showDetail(r *http.Request) bool {
	if !s.AuthOn() {
		return true
	}
	if presentedKey(r) == "" { // no key offered, if perhaps another scheme's credentials
		return false
	}
	k, ok, _ := s.checkKey(r)
	return ok && k >= 0
}
