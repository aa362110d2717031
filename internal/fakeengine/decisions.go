package fakeengine

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"

	"system1/internal/decision"
	"system1/internal/decisionsapi"
)

// Decisions is a running fake Decisions endpoint, OpenAI's POST
// /v1/decisions as vLLM, Fireworks or another system1 serve it: package
// decisionsapi's own server side (its parser, its answers, its errors)
// over the distributions its Reply gives. It answers GET /v1/models in
// OpenAI's shape for probes, and counts its calls.
//
// Of Reply it reads Probs and Dist (the distributions), Refuse and
// Abstain (questions answered with a refusal: those named, or all),
// Status, Message and RetryAfter (a refusal of the request in OpenAI's
// envelope), Raw, Model and the Hang fault.
//
// Its Calls count POST /v1/decisions requests, its Probes GET /v1/models.
type Decisions struct{ endpoint }

// StartDecisions runs an endpoint answering as r until the test ends.
func StartDecisions(t testing.TB, r Reply) *Decisions {
	t.Helper()
	d := &Decisions{endpoint{r: r}}
	d.listen(d.serve)
	t.Cleanup(d.Close)
	return d
}

func (d *Decisions) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r := d.reply()
	w.Header().Set(decisionsapi.RequestIDHeader, "req_fake")
	switch {
	case req.Method == http.MethodGet && req.URL.Path == "/v1/models":
		d.Probes.Add(1)
		out, _ := json.Marshal(map[string]any{"object": "list", "data": []map[string]any{
			{"id": r.model(), "object": "model", "created": 1767225600, "owned_by": "fake"}}})
		writeBody(w, http.StatusOK, string(out))
		return
	case req.Method != http.MethodPost || req.URL.Path != "/v1/decisions":
		writeDecisionsError(w, &decisionsapi.Error{Status: http.StatusNotFound, Type: decisionsapi.TypeInvalidRequest, Message: "no such route"})
		return
	}
	d.called(body)
	switch {
	case r.Fault == Hang:
		d.block(req)
		return
	case r.Status != 0:
		if r.RetryAfter != "" {
			w.Header().Set("Retry-After", r.RetryAfter)
		}
		writeDecisionsError(w, &decisionsapi.Error{Status: r.Status, Type: decisionsapi.TypeServer, Message: cmp.Or(r.Message, http.StatusText(r.Status))})
		return
	case r.Raw != "":
		writeBody(w, http.StatusOK, r.Raw)
		return
	}
	p := decisionsapi.ParseRequest(body)
	if e := p.Validate(decision.Limits{MaxStateBytes: 1 << 30, MaxInstructionBytes: 1 << 30, MaxOptionBytes: 1 << 30,
		MaxQuestions: decisionsapi.MaxQuestions, MinChoiceOptions: 2, MaxChoiceOptions: decisionsapi.MaxChoices, MinScoreLevels: 2, MaxScoreLevels: 10}); e != nil {
		writeDecisionsError(w, e)
		return
	}
	if p.Model != r.model() {
		writeDecisionsError(w, decisionsapi.ModelNotFound(p.Model))
		return
	}
	res := decisionsapi.Response{Model: r.model(), Request: p, Refused: make([]bool, len(p.Questions)),
		Usage: decisionsapi.Usage{InputTokens: 10, OutputTokens: len(p.Questions)}}
	for i, q := range p.Questions {
		res.Refused[i] = r.Abstain || slices.Contains(r.Refuse, p.Asked[i].Name)
		res.Dists = append(res.Dists, r.dist(q))
	}
	out, err := res.AppendJSON(nil)
	if err != nil {
		writeDecisionsError(w, decisionsapi.Internal(err.Error()))
		return
	}
	writeBody(w, http.StatusOK, string(out))
}

func writeDecisionsError(w http.ResponseWriter, e *decisionsapi.Error) {
	e.SetHeaders(w.Header())
	writeBody(w, e.Status, string(e.AppendJSON(nil)))
}
