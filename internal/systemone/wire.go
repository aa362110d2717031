package systemone

import (
	"cmp"
	"encoding/json"
	"slices"
	"time"

	"system1/internal/decision"
)

// RequestIDHeader is the header every reply carries its request id in.
const RequestIDHeader = "X-Typesafe-Request-Id"

// NotFoundBody is the body of a 404 for a route that does not exist,
// FastAPI's, as hosted Jev sends it.
var NotFoundBody = []byte(`{"detail":"Not Found"}`)

// MethodNotAllowedBody is the body of a 405 for a route asked with a
// method it does not answer, FastAPI's, as hosted Jev sends it.
var MethodNotAllowedBody = []byte(`{"detail":"Method Not Allowed"}`)

// Model is one entry of GET /v1/models.
type Model struct {
	ID          string
	Description string
	// Released is the model's release date; Jev's list requires one.
	Released time.Time
	// Capabilities, when set, say what the model can be asked, in the
	// System One wire's words (models[]); DataCapabilities the same in
	// the words of the wire that reads OpenAI's list (data[]), OpenAI's
	// Decisions. Clients of either shape ignore fields they do not know.
	Capabilities, DataCapabilities *decision.Capabilities
}

// AppendModels writes GET /v1/models in both shapes clients read, sorted
// by id: Jev's {"models": [{"name", "description", "release_date",
// "capabilities"}]} and OpenAI's {"object": "list", "data": [{"id",
// "object", "created", "owned_by", "capabilities"}]}, created the release
// date in Unix seconds.
func AppendModels(b []byte, models []Model) []byte {
	type jev struct {
		Name         string                 `json:"name"`
		Description  string                 `json:"description"`
		ReleaseDate  string                 `json:"release_date"`
		Capabilities *decision.Capabilities `json:"capabilities,omitempty"`
	}
	body := struct {
		Models []jev      `json:"models"`
		Object string     `json:"object"`
		Data   []oaiModel `json:"data"`
	}{Models: []jev{}, Object: "list", Data: []oaiModel{}}
	models = slices.SortedFunc(slices.Values(models), func(a, b Model) int { return cmp.Compare(a.ID, b.ID) })
	for _, m := range models {
		body.Models = append(body.Models, jev{Name: m.ID, Description: m.Description, ReleaseDate: m.Released.Format(time.DateOnly), Capabilities: m.Capabilities})
		body.Data = append(body.Data, m.oai())
	}
	out, _ := json.Marshal(body) // plain strings always marshal
	return append(b, out...)
}

// AppendModel writes one model as GET /v1/models/{id} answers it, OpenAI's
// model object (the SDK's models.retrieve): the entry of the list's data.
func AppendModel(b []byte, m Model) []byte {
	out, _ := json.Marshal(m.oai()) // plain strings always marshal
	return append(b, out...)
}

// oaiModel is a model in OpenAI's shape, created the release date in
// Unix seconds.
type oaiModel struct {
	ID           string                 `json:"id"`
	Object       string                 `json:"object"`
	Created      int64                  `json:"created"`
	OwnedBy      string                 `json:"owned_by"`
	Capabilities *decision.Capabilities `json:"capabilities,omitempty"`
}

func (m Model) oai() oaiModel {
	return oaiModel{ID: m.ID, Object: "model", Created: m.Released.Unix(), OwnedBy: "system1", Capabilities: m.DataCapabilities}
}

// Capabilities are what a model under a server's limits can be asked on
// this wire, its question types in the wire's words (the domain's).
func Capabilities(lim decision.Limits) decision.Capabilities {
	return lim.Capabilities(decision.KindName)
}
