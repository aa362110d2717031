package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/outcomes"
)

const logKey = "sk-test-key-that-must-never-be-stored"

// logServe runs the HTTP face with /v1/decide over one fake engine, both
// faces calibrated by one fits file and recording in a real SQLite log.
func logServe(t *testing.T) (*system1, *decisionlog.Log, *calibration.Fits, string) {
	t.Helper()
	dir := t.TempDir()
	fits := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{
		{Model: fakeengine.DefaultModel, Kind: decision.Choice, Bucket: calibration.Bucket(3), Temperature: 2},
		{Model: fakeengine.DefaultModel, Kind: decision.Choice, Bucket: calibration.Bucket(2), Temperature: 2},
		{Model: fakeengine.DefaultModel, Kind: decision.Noul, Bucket: calibration.Bucket(2), Temperature: 2},
	}}
	data, err := fits.Encode()
	if err != nil {
		t.Fatal(err)
	}
	fitsPath := filepath.Join(dir, "fits.json")
	if err := os.WriteFile(fitsPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := outcomes.LoadFits(fitsPath)
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "decisions.db")
	dlog, err := decisionlog.Open(t.Context(), decisionlog.Options{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dlog.Close(t.Context()) })
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.6, 0.3, 0.1)}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n1", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{n}, fleet.Options{Policy: testPolicy})
	cfg, err := config.Parse([]byte("gateway:\n  fits: " + fitsPath + "\n  chain:\n    - {name: local, model: fake}\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Both faces calibrate by one fits file and record in one log, as
	// system1 serve builds them.
	svc := answer.New(answer.Options{Router: router, Fits: func() *calibration.Fits { return loaded }, Recorder: dlog})
	api := httpapi.New(httpapi.Options{
		Answer: svc, Rounding: 2, Keys: []httpapi.Key{{Name: "log", Secret: logKey}},
		Feedback: outcomes.NewFeedback(dlog), DecisionLog: dlog,
		Decide: gateway.New(gateway.Options{Config: cfg, Answer: svc, Face: decisionlog.FaceDecide}),
	})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &system1{URL: srv.URL, client: &http.Client{Transport: checker{t: t, base: http.DefaultTransport}}}, dlog, loaded, dbPath
}

var auth = "Authorization: Bearer " + logKey

// Every question /v1/systemone and /v1/decide answer is recorded once,
// by the core, with the steps applied and the fit's version; never the
// key, and the state only as its hash.
func TestDecisionLogRecordsEveryFace(t *testing.T) {
	s, dlog, fits, dbPath := logServe(t)
	if fits.Revision == "" {
		t.Fatal("the loaded fits have no revision")
	}
	r := s.ask(t, calRequest, auth)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	if got := r.header.Get("X-System1-Calibrated"); got != "false" { // the score has no fit
		t.Errorf("x-system1-calibrated %q", got)
	}
	id := r.header.Get("X-Typesafe-Request-Id")
	es, err := dlog.Lookup(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 {
		t.Fatalf("%d records for request %s; want 3", len(es), id)
	}
	byQ := map[string]decisionlog.Entry{}
	for _, e := range es {
		byQ[e.QuestionID] = e
		if e.Face != decisionlog.FaceSystemOne || e.Model != fakeengine.DefaultModel || e.Node != "n1" {
			t.Errorf("%s: face %q model %q node %q", e.QuestionID, e.Face, e.Model, e.Node)
		}
		if e.StateHash != fmt.Sprintf("%x", sha256.Sum256([]byte(`"Ticket: charged twice."`))) || e.State != nil {
			t.Errorf("%s: state hash %q, state %q", e.QuestionID, e.StateHash, e.State)
		}
	}
	dept := byQ["dept"]
	if !slices.Equal(dept.Options, []string{"billing", "technical", "sales"}) || dept.Kind != decision.Choice {
		t.Errorf("dept: options %q kind %s", dept.Options, dept.Kind)
	}
	if len(dept.Steps) != 1 || dept.Steps[0].Name != decision.StepTemperature || !strings.HasSuffix(dept.Steps[0].Version, "@"+fits.Revision) {
		t.Fatalf("dept: steps %+v; want one temperature step of version %s", dept.Steps, fits.Revision)
	}
	want := decision.Distribution(dept.EngineDist).Temper(2)
	if !near(dept.Steps[0].Dist, want) || !near(dept.Final, want) {
		t.Errorf("dept: tempered %v, final %v; want %v", dept.Steps[0].Dist, dept.Final, want)
	}
	if !near(dept.Uncalibrated(), dept.EngineDist) {
		t.Errorf("dept: uncalibrated %v; engine %v", dept.Uncalibrated(), dept.EngineDist)
	}
	if anger := byQ["anger"]; len(anger.Steps) != 0 || !near(anger.Final, anger.EngineDist) {
		t.Errorf("anger (no fit): steps %+v final %v engine %v", anger.Steps, anger.Final, anger.EngineDist)
	}

	d := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Which team?","options":["billing","technical","sales"],"request_id":"dec-1"}`, auth)
	if d.status != http.StatusOK {
		t.Fatal(d)
	}
	var res gateway.Response
	if err := json.Unmarshal(d.body, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Calibrated || res.FitVersion != fits.Revision {
		t.Errorf("decide: calibrated %v fit_version %q; want %q", res.Calibrated, res.FitVersion, fits.Revision)
	}
	es, err = dlog.Lookup(t.Context(), "dec-1")
	if err != nil || len(es) != 1 {
		t.Fatalf("decide records: %v %v", es, err)
	}
	if e := es[0]; e.Face != decisionlog.FaceDecide || e.QuestionID != decisionlog.DecideQuestion || len(e.Steps) != 1 || !strings.HasSuffix(e.Steps[0].Version, "@"+fits.Revision) {
		t.Errorf("decide record: %+v", e)
	}
	if err := dlog.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dbPath, dbPath + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(logKey)) {
			t.Errorf("%s holds the API key", p)
		}
	}
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-9 || d < -1e-9 {
			return false
		}
	}
	return true
}

// POST /v1/feedback matches outcomes to recorded answers, behind the same
// auth as the rest of /v1, with the errors of the rest of /v1.
func TestFeedbackHTTP(t *testing.T) {
	s, dlog, _, _ := logServe(t)
	r := s.ask(t, calRequest, auth)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	jev := r.header.Get("X-Typesafe-Request-Id")
	if d := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Urgent?","request_id":"dec-yn"}`, auth); d.status != http.StatusOK {
		t.Fatal(d)
	}
	if d := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Which?","options":["a","b"],"request_id":"dec-ab"}`, auth); d.status != http.StatusOK {
		t.Fatal(d)
	}
	for _, c := range []struct {
		name, body string
		status     int
		param      string // the 422's param
		has        string // in the body
	}{
		{"choice", `{"request_id":"` + jev + `","question":"dept","outcome":"billing"}`, 200, "", `"outcome":"billing"`},
		{"noul as a boolean", `{"request_id":"` + jev + `","question":"urgent","outcome":false}`, 200, "", `"outcome":"false"`},
		{"score level as a number", `{"request_id":"` + jev + `","question":"anger","outcome":2}`, 200, "", `"outcome":"2"`},
		{"decide option, question left out", `{"request_id":"dec-ab","outcome":"b"}`, 200, "", `"question":"decision"`},
		{"decide yes", `{"request_id":"dec-yn","outcome":"yes"}`, 200, "", `"outcome":"true"`},
		{"no option fit", `{"request_id":"dec-ab","outcome":"none"}`, 200, "", `"outcome":"none"`},
		{"a yes/no has no none", `{"request_id":"dec-yn","outcome":"none"}`, 422, "outcome", ""},
		{"batch", `{"outcomes":[{"request_id":"dec-ab","outcome":"a"},{"request_id":"` + jev + `","question":"dept","outcome":"sales"}]}`, 200, "", `"outcomes":2`},
		{"unknown request", `{"request_id":"nope","outcome":"a"}`, 404, "", "not_found_error"},
		{"not an option", `{"request_id":"dec-ab","outcome":"c"}`, 422, "outcome", ""},
		{"not a level", `{"request_id":"` + jev + `","question":"anger","outcome":1.5}`, 422, "outcome", `"message":"outcome: 1.5 is not a level`},
		{"an object", `{"request_id":"` + jev + `","question":"anger","outcome":{}}`, 422, "outcome", `"message":"outcome: must be an option key`},
		{"unknown question", `{"request_id":"` + jev + `","question":"nope","outcome":"a"}`, 422, "question", ""},
		{"question needed", `{"request_id":"` + jev + `","outcome":"billing"}`, 422, "question", ""},
		{"no outcome", `{"request_id":"dec-ab"}`, 422, "outcome", ""},
		{"no request id", `{"outcome":"a"}`, 422, "request_id", ""},
		{"unknown field", `{"request_id":"dec-ab","outcome":"a","extra":1}`, 422, "extra", ""},
		{"batch item bad", `{"outcomes":[{"request_id":"dec-ab","outcome":"a"},{"request_id":"dec-ab","outcome":"zzz"}]}`, 422, "outcomes.1.outcome", ""},
		{"not JSON", `nope`, 422, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := s.do(t, http.MethodPost, "/v1/feedback", c.body, auth)
			if got.status != c.status {
				t.Fatalf("%s", got)
			}
			if c.has != "" && !strings.Contains(string(got.body), c.has) {
				t.Errorf("%s lacks %s", got, c.has)
			}
			if c.status == 422 {
				var e struct {
					Error struct {
						Type  string  `json:"type"`
						Param *string `json:"param"`
					} `json:"error"`
					Detail []any `json:"detail"`
				}
				if err := json.Unmarshal(got.body, &e); err != nil || e.Error.Type != "invalid_request_error" || len(e.Detail) != 1 {
					t.Fatalf("not /v1's 422 shape: %s", got)
				}
				if p := e.Error.Param; (c.param == "") != (p == nil) || (p != nil && *p != c.param) {
					t.Errorf("param %v; want %q: %s", p, c.param, got)
				}
			}
		})
	}
	// The batch with a bad item recorded none of it: dec-ab's latest is
	// still the batch before's "a", and the count says how many were.
	es, err := dlog.Lookup(t.Context(), "dec-ab")
	if err != nil || len(es) != 1 || es[0].Outcome == nil || es[0].Outcome.Value != "a" || es[0].Outcomes != 3 {
		t.Fatalf("dec-ab: %+v %v", es, err)
	}
	if got := s.do(t, http.MethodPost, "/v1/feedback", `{"request_id":"dec-ab","outcome":"a"}`); got.status != http.StatusUnauthorized {
		t.Errorf("without a key: %s", got)
	}
}

// With the log off, feedback says so (503), and answers are still given.
func TestFeedbackLogOff(t *testing.T) {
	s := serve(t, setup{nodes: []node{startNode(t, "n", fakeengine.LlamaCpp, fakeengine.Behavior{})}})
	got := s.do(t, http.MethodPost, "/v1/feedback", `{"request_id":"x","outcome":"a"}`)
	if got.status != http.StatusServiceUnavailable || !strings.Contains(string(got.body), "decision log is off") {
		t.Fatalf("%s", got)
	}
}

// A batch whose write fails is a 503, as when the log is off, and records
// none of its outcomes (a trigger refuses the second): the caller sends it
// again whole.
func TestFeedbackWriteFailureRecordsNone(t *testing.T) {
	s, dlog, _, dbPath := logServe(t)
	for _, id := range []string{"dec-1", "dec-2"} {
		if d := s.do(t, http.MethodPost, "/v1/decide", `{"question":"Which?","options":["a","b"],"request_id":"`+id+`"}`, auth); d.status != http.StatusOK {
			t.Fatal(d)
		}
	}
	if err := dlog.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER fail BEFORE INSERT ON outcomes WHEN NEW.request_id = 'dec-2' BEGIN SELECT RAISE(ABORT, 'the disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	batch := `{"outcomes":[{"request_id":"dec-1","outcome":"a"},{"request_id":"dec-2","outcome":"b"}]}`
	got := s.do(t, http.MethodPost, "/v1/feedback", batch, auth)
	// The log's error is the server's log line's (TestDecisionLogErrorNamesNoAddress).
	if got.status != http.StatusServiceUnavailable || !strings.Contains(string(got.body), "the decision log failed") {
		t.Fatalf("%s", got)
	}
	for _, id := range []string{"dec-1", "dec-2"} {
		es, err := dlog.Lookup(t.Context(), id)
		if err != nil || len(es) != 1 || es[0].Outcomes != 0 {
			t.Errorf("%s after the failed batch: %+v %v", id, es, err)
		}
	}
	if _, err := db.Exec(`DROP TRIGGER fail`); err != nil {
		t.Fatal(err)
	}
	if got := s.do(t, http.MethodPost, "/v1/feedback", batch, auth); got.status != http.StatusOK || strings.Count(string(got.body), `"outcomes":1`) != 2 {
		t.Errorf("sent again: %s", got)
	}
}
