package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/gateway"
	"system1/internal/outcomes"
)

// The decision log keeps the label mass of every answered question on
// both faces, so that a min_label_mass gate can be chosen from outcomes:
// /v1/systemone's records hold what X-System1-Label-Mass said; decide's
// hold its label_mass, for a decision, for an abstention under
// min_label_mass (the answers a gate would have lost are the ones to
// count) and for a question asked with none_option, whose record lists
// the implicit option among the options.
func TestDecisionLogKeepsLabelMass(t *testing.T) {
	s, dlog, _, _ := logServe(t)
	r := s.ask(t, calRequest, auth)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	header := map[string]float64{}
	for _, item := range strings.Split(r.header.Get("X-System1-Label-Mass"), ";") {
		q, v, _ := strings.Cut(strings.TrimSpace(item), "=")
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("label mass header %q: %v", r.header.Get("X-System1-Label-Mass"), err)
		}
		header[q] = f
	}
	es, err := dlog.Lookup(t.Context(), r.header.Get("X-Typesafe-Request-Id"))
	if err != nil || len(es) != 3 || len(header) != 3 {
		t.Fatalf("%d records, header %v: %v", len(es), header, err)
	}
	for _, e := range es {
		if e.LabelMass == nil || math.Abs(*e.LabelMass-header[e.QuestionID]) > 0.0005 {
			t.Errorf("/v1/systemone %s: recorded label mass %v, header %v", e.QuestionID, e.LabelMass, header[e.QuestionID])
		}
	}

	for _, tc := range []struct {
		id, extra string
		status    string
		options   []string
	}{
		{"dec-decided", "", gateway.Decided, []string{"a", "b"}},
		{"dec-under-gate", `,"min_label_mass":0.95`, gateway.Abstained, []string{"a", "b"}},
		{"dec-none", `,"none_option":true`, gateway.Decided, []string{"a", "b", decision.NoneOption}},
	} {
		d := s.do(t, http.MethodPost, "/v1/decide", fmt.Sprintf(`{"question":"Which?","options":["a","b"],"min_confidence":0,"request_id":%q%s}`, tc.id, tc.extra), auth)
		var res gateway.Response
		if d.status != http.StatusOK || json.Unmarshal(d.body, &res) != nil || res.Status != tc.status || res.LabelMass == nil {
			t.Fatalf("%s: %s", tc.id, d)
		}
		es, err := dlog.Lookup(t.Context(), tc.id)
		if err != nil || len(es) != 1 {
			t.Fatalf("%s: %d records, %v", tc.id, len(es), err)
		}
		e := es[0]
		if e.Face != decisionlog.FaceDecide || e.LabelMass == nil || math.Abs(*e.LabelMass-*res.LabelMass) > 0.0005 || !slices.Equal(e.Options, tc.options) {
			t.Errorf("%s: record face %s, label mass %v, options %q; the answer's label_mass %v", tc.id, e.Face, e.LabelMass, e.Options, *res.LabelMass)
		}
	}

	// Outcomes, one in scope and one that no option fit, reach the
	// report's label-mass gate with the loss asked for; the question
	// asked with none_option is left out of it, and one in-scope outcome
	// is too few for a gate.
	fb := s.do(t, http.MethodPost, "/v1/feedback", `{"outcomes":[{"request_id":"dec-decided","outcome":"a"},{"request_id":"dec-under-gate","outcome":"none"},{"request_id":"dec-none","outcome":"b"}]}`, auth)
	if fb.status != http.StatusOK {
		t.Fatal(fb)
	}
	c := s.do(t, http.MethodGet, "/v1/calibration?max_in_scope_loss=0.5", "", auth)
	var rep outcomes.CalibrationReport
	if c.status != http.StatusOK || json.Unmarshal(c.body, &rep) != nil || len(rep.LabelMass) != 1 {
		t.Fatalf("%s", c)
	}
	if g := rep.LabelMass[0]; g.InScope != 1 || g.OutOfScope != 1 || g.MaxInScopeLoss != 0.5 || g.MinLabelMass != nil || g.Flagged != nil {
		t.Errorf("label mass gate %+v", g)
	}
}
