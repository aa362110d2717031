package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
)

// GET /v1/models lists every model the nodes serve, in both shapes (the
// checking client verifies the shapes), plus the configured aliases whose
// target is served, and nothing else.
func TestModels(t *testing.T) {
	llama := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"tiny"}, Aliases: []string{"tiny-q8"}})
	t.Cleanup(llama.Close)
	ollama := fakeengine.New(fakeengine.Options{Dialect: fakeengine.Ollama, Models: []string{"qwen3:0.6b", "tiny"}})
	t.Cleanup(ollama.Close)
	nodes := []node{
		{fake: llama, cfg: config.Node{Name: "llama", URL: llama.URL, Dialect: "llamacpp"}},
		{fake: ollama, cfg: config.Node{Name: "ollama", URL: ollama.URL, Dialect: "ollama"}},
	}
	for _, tc := range []struct {
		name    string
		aliases map[string]string
		want    []string
	}{
		{"no aliases", nil, []string{"qwen3:0.6b", "tiny", "tiny-q8"}},
		{"aliases", map[string]string{"jev-latest": "tiny", "jev-preview": "not-served"}, []string{"jev-latest", "qwen3:0.6b", "tiny", "tiny-q8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, setup{nodes: nodes, aliases: tc.aliases})
			r := s.do(t, http.MethodGet, "/v1/models", "")
			var l modelList
			if err := json.Unmarshal(r.body, &l); err != nil || r.status != http.StatusOK {
				t.Fatalf("%s: %v", r, err)
			}
			var names []string
			desc := map[string]string{}
			for _, m := range l.Models {
				names = append(names, m.Name)
				desc[m.Name] = m.Description
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("models %v, want %v", names, tc.want)
			}
			if d := desc["tiny"]; !strings.Contains(d, "llama") || !strings.Contains(d, "ollama") {
				t.Errorf("tiny is %q; both nodes serve it", d)
			}
			if d, ok := desc["jev-latest"]; ok && !strings.Contains(d, "alias of tiny") {
				t.Errorf("jev-latest is %q", d)
			}
		})
	}
}

// Each model's capabilities follow from the limits that apply to it:
// max_choices the largest option cap of the nodes serving it, the
// configuration's max_questions, and on the Decisions wire its own caps
// where they are stricter (400 questions, 255 choices).
func TestModelCapabilities(t *testing.T) {
	wide := startNode(t, "wide", fakeengine.LlamaCpp, fakeengine.Behavior{}, func(c *config.Node) { c.MaxOptions = 300 })
	narrow := startNode(t, "narrow", fakeengine.Ollama, fakeengine.Behavior{}, func(c *config.Node) { c.MaxOptions = 26; c.Models = []string{"small"} })
	s := serve(t, setup{nodes: []node{wide, narrow}, maxQuestions: 500})
	var l modelList
	if r := s.do(t, http.MethodGet, "/v1/models", ""); json.Unmarshal(r.body, &l) != nil || len(l.Models) != 2 {
		t.Fatalf("%s", r)
	}
	for i, want := range []struct {
		name                   string
		jevChoices, oaiChoices int
	}{{"fake", 300, 255}, {"small", 26, 26}} {
		jev, oai := l.Models[i].Capabilities, l.Data[i].Capabilities
		if l.Models[i].Name != want.name || jev.MaxChoices != want.jevChoices || oai.MaxChoices != want.oaiChoices ||
			jev.MaxQuestions != 500 || oai.MaxQuestions != 400 || jev.MaxStateBytes == 0 {
			t.Errorf("%s: %+v and %+v", l.Models[i].Name, jev, oai)
		}
	}
}

// GET /health reports every node, healthy, with the models it serves.
func TestHealth(t *testing.T) {
	s := serve(t, setup{nodes: []node{
		startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{}),
		startNode(t, "b", fakeengine.OpenAI, fakeengine.Behavior{}, discovered),
	}})
	r := s.do(t, http.MethodGet, "/health", "")
	var h struct {
		Status string
		Nodes  []struct {
			Name    string
			Dialect string
			Models  []string
			Healthy bool
		}
	}
	if err := json.Unmarshal(r.body, &h); err != nil || h.Status != "ok" || len(h.Nodes) != 2 {
		t.Fatalf("%s: %v", r, err)
	}
	for _, n := range h.Nodes {
		if !n.Healthy || !slices.Equal(n.Models, []string{fakeengine.DefaultModel}) {
			t.Errorf("node %+v", n)
		}
	}
}

// The routes OpenAI's clients call answer everything in OpenAI's
// envelope with x-request-id (the checker holds every reply under them
// to it): GET /v1/models/{id}, the SDK's models.retrieve, answers the
// model object of the list, or a 404 model_not_found; a path no route
// serves below them is a 404, a method they do not take a 405 with
// Allow; a wrong key on the list is a 401 both wires' clients read.
func TestOpenAIRoutesAnswerInTheirEnvelope(t *testing.T) {
	s := serve(t, setup{nodes: []node{startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})}, keys: []string{"k"}})
	const auth = "Authorization: Bearer k"
	r := s.do(t, http.MethodGet, "/v1/models/"+fakeengine.DefaultModel, "", auth)
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil || r.status != http.StatusOK || m["id"] != fakeengine.DefaultModel || m["object"] != "model" ||
		m["owned_by"] != "system1" || m["created"] == nil || m["capabilities"] == nil {
		t.Errorf("models.retrieve: %s", r)
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(s.do(t, http.MethodGet, "/v1/models", "", auth).body, &list); err != nil || len(list.Data) != 1 || !reflect.DeepEqual(list.Data[0], m) {
		t.Errorf("the model %v is not the list's %v", m, list.Data)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodGet, "/v1/models/nope", http.StatusNotFound, "model_not_found", ""},
		{http.MethodGet, "/v1/models/" + fakeengine.DefaultModel + "/x", http.StatusNotFound, "model_not_found", ""},
		{http.MethodPost, "/v1/decisions/x", http.StatusNotFound, "", ""},
		{http.MethodGet, "/v1/decisions", http.StatusMethodNotAllowed, "", "POST"},
		{http.MethodPost, "/v1/models", http.StatusMethodNotAllowed, "", "GET, HEAD"},
		{http.MethodDelete, "/v1/models/" + fakeengine.DefaultModel, http.StatusMethodNotAllowed, "", "GET, HEAD"},
	} {
		r := s.do(t, tc.method, tc.path, "", auth)
		if e := openAIError(t, r); r.status != tc.status || str(e.Code) != tc.code || e.Type != "invalid_request_error" || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %s (Allow %q)", tc.method, tc.path, r, r.header.Get("Allow"))
		}
	}
	for _, path := range []string{"/v1/models", "/v1/models/" + fakeengine.DefaultModel} {
		r := s.do(t, http.MethodGet, path, "", "Authorization: Bearer wrong")
		var both struct {
			Detail struct {
				ErrorType string `json:"error_type"`
			} `json:"detail"`
		}
		if e := openAIError(t, r); r.status != http.StatusUnauthorized || str(e.Code) != "invalid_api_key" ||
			json.Unmarshal(r.body, &both) != nil || both.Detail.ErrorType != "authentication_error" {
			t.Errorf("%s with a wrong key: %s", path, r)
		}
	}
}

// A cascade is listed with the date its stages were first listed, as a
// model of the nodes is: never the zero time, which read as released in
// the year 1 (created -62135596800).
func TestModelsDateACascade(t *testing.T) {
	n := startNode(t, "n", fakeengine.OpenAI, fakeengine.Behavior{})
	s := serve(t, setup{nodes: []node{n}, cascades: []answer.Cascade{{Model: "tiered", Stages: []string{fakeengine.DefaultModel}, Keep: true}}})
	r := s.do(t, http.MethodGet, "/v1/models", "")
	var l modelList
	if err := json.Unmarshal(r.body, &l); err != nil || r.status != http.StatusOK {
		t.Fatalf("%s: %v", r, err)
	}
	dates, created := map[string]string{}, map[string]int64{}
	for _, m := range l.Models {
		dates[m.Name] = m.ReleaseDate
	}
	for _, m := range l.Data {
		created[m.ID] = m.Created
	}
	if dates["tiered"] == "" || dates["tiered"] != dates[fakeengine.DefaultModel] || created["tiered"] != created[fakeengine.DefaultModel] {
		t.Errorf("the cascade tiered is dated %q (created %d), its stage %q (created %d)", dates["tiered"], created["tiered"],
			dates[fakeengine.DefaultModel], created[fakeengine.DefaultModel])
	}
	one := s.do(t, http.MethodGet, "/v1/models/tiered", "")
	var m struct {
		Created int64 `json:"created"`
	}
	if err := json.Unmarshal(one.body, &m); err != nil || m.Created != created[fakeengine.DefaultModel] {
		t.Errorf("GET /v1/models/tiered: %s", one)
	}
}
