package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/testengine"
)

// recorded keeps the decision log's records in memory.
type recorded struct {
	mu  sync.Mutex
	got []decisionlog.Record
}

func (r *recorded) Record(rec decisionlog.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, rec)
}

// Over the real llama-server and the tiny model, the same request on the
// two wires reads the same distributions: the engine's, unrounded, as the
// decision log records them, and so the same printed numbers on both
// wires (probabilities, confidences, scores). The engine's own reading
// of one prompt moves by a few ten-thousandths with what its slot's cache
// held before (docs/fingerprints.md), so each question is asked alone, on
// one slot, and the Decisions wire's read is held to the System One
// wire's after the same prompt: Jev, Decisions, Jev again.
func TestRealEngineSameAnswerOnBothWires(t *testing.T) {
	srv := testengine.Start(t, 1)
	n, err := fleet.NewNode(config.Node{Name: "llama", URL: srv.URL, Dialect: "llamacpp", Models: []string{testengine.Model}},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	// The tiny model is served under its own id; the wires' requests name
	// "fake", which an alias maps to it.
	router := fleet.New([]*fleet.Node{n}, fleet.Options{Aliases: map[string]string{"fake": testengine.Model}, Policy: testPolicy})
	var rec recorded
	api := httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: router, Recorder: &rec}), Rounding: 2, Version: "test"})
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	s := &system1{URL: hs.URL, client: &http.Client{Transport: checker{t: t, base: http.DefaultTransport}}}

	const state = `"Ticket: I was charged twice."`
	for _, q := range []struct{ id, jev, decisions string }{
		{"dept", `"dept":{"type":"choice","instructions":"Which department?","criteria":{"billing":null,"technical":"bugs and outages","sales":null}}`,
			`{"type":"choice","name":"dept","instructions":"Which department?","choices":[{"value":"billing"},{"value":"technical","description":"bugs and outages"},{"value":"sales"}]}`},
		{"urgent", `"urgent":{"type":"noul","instructions":"Is it urgent?"}`, `{"type":"predicate","name":"urgent","instructions":"Is it urgent?"}`},
		{"mood", `"mood":{"type":"score","instructions":"How upset is the customer?","criteria":["calm","annoyed","angry"]}`,
			`{"type":"score","name":"mood","instructions":"How upset is the customer?","levels":[{"label":"calm"},{"label":"annoyed"},{"label":"angry"}]}`},
	} {
		jevBody := `{"model":"fake","state":` + state + `,"questions":{` + q.jev + `}}`
		s.ask(t, jevBody) // the slot now holds this prompt
		r := s.do(t, http.MethodPost, "/v1/decisions", `{"model":"fake","input":`+state+`,"questions":[`+q.decisions+`]}`)
		dec := rec.last(decisionlog.FaceDecisions)
		s.ask(t, jevBody)
		jev := rec.last(decisionlog.FaceSystemOne)
		if len(jev.Final) == 0 || !slices.Equal(jev.Final, dec.Final) || !slices.Equal(jev.EngineDist, dec.EngineDist) || *jev.LabelMass != *dec.LabelMass {
			t.Errorf("%s: the System One wire read %v (mass %v), the Decisions wire %v (mass %v)", q.id, jev.Final, *jev.LabelMass, dec.Final, *dec.LabelMass)
		}
		if d := decisionsReadings(t, r)[0]; !printedAs(t, s.ask(t, jevBody), d) {
			t.Errorf("%s: printed differently: %s", q.id, r.body)
		}
	}
}

// last is the last record of a face.
func (r *recorded) last(face string) decisionlog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.got) - 1; i >= 0; i-- {
		if r.got[i].Face == face {
			return r.got[i]
		}
	}
	return decisionlog.Record{}
}

// printedAs reports whether a one-question System One reply prints the
// numbers d does.
func printedAs(t *testing.T, r reply, d reading) bool {
	t.Helper()
	var body struct {
		Answers map[string]struct {
			Noul, Score, Confidence float64
			Probabilities           map[string]float64
		}
	}
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Answers) != 1 {
		t.Fatalf("%s", r)
	}
	for _, a := range body.Answers {
		if a.Probabilities == nil {
			return len(d.Probabilities) == 1 && a.Noul == d.Probabilities[0]
		}
		var got []float64
		for _, k := range []string{"billing", "technical", "sales", "0", "1", "2"} {
			if p, ok := a.Probabilities[k]; ok {
				got = append(got, p)
			}
		}
		return slices.Equal(got, d.Probabilities) && a.Confidence == d.Confidence && a.Score == d.Score
	}
	return false
}
