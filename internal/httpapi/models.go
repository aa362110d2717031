package httpapi

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"system1/internal/redact"
)

// handleModels answers GET /v1/models with the union of the nodes' models
// and the configured aliases, in both shapes clients read: Jev's
// {"models": [...]} and OpenAI's {"object": "list", "data": [...]}.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	type jev struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		ReleaseDate string `json:"release_date"`
	}
	type oai struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		OwnedBy string `json:"owned_by"`
	}
	body := struct {
		Models []jev  `json:"models"`
		Object string `json:"object"`
		Data   []oai  `json:"data"`
	}{Models: []jev{}, Object: "list", Data: []oai{}}
	for _, m := range s.opt.Router.Catalog() {
		desc := "served by " + m.Via
		if m.AliasOf != "" {
			desc = "alias of " + m.AliasOf + ", " + desc
		}
		// Jev's list requires a release date; a local model has none, so
		// this is the date this server first listed it.
		body.Models = append(body.Models, jev{Name: m.ID, Description: desc, ReleaseDate: m.Seen.Format(time.DateOnly)})
		body.Data = append(body.Data, oai{ID: m.ID, Object: "model", OwnedBy: "system1"})
	}
	slices.SortFunc(body.Models, func(a, b jev) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(body.Data, func(a, b oai) int { return cmp.Compare(a.ID, b.ID) })
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

// handleHealth answers GET /health: {"status":"ok"} while the process
// serves, with each node's state. With auth on, the nodes (names, models,
// cooldown reasons) are shown only to a caller with a key: anyone else
// gets the status alone. A wrong key here counts against the address's
// allowance like anywhere else, so that the detail cannot be used to test
// guesses.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	body := struct {
		Status  string `json:"status"`
		Version string `json:"version,omitempty"`
		Auth    bool   `json:"auth"`
		Nodes   any    `json:"nodes,omitempty"`
	}{Status: "ok", Auth: s.AuthOn()}
	detail := !s.AuthOn()
	if s.AuthOn() && presentsKey(r) {
		k, ok, _ := s.checkKey(r)
		detail = ok && k >= 0
	}
	if detail {
		body.Version = s.opt.Version
		states := s.opt.Router.States()
		for i := range states {
			states[i].CoolReason = redact.Text(states[i].CoolReason)
			states[i].Error = redact.Text(states[i].Error)
			for j := range states[i].ModelCooldowns {
				states[i].ModelCooldowns[j].Reason = redact.Text(states[i].ModelCooldowns[j].Reason)
			}
		}
		body.Nodes = states
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}
