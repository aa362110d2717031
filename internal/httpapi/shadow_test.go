package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"system1/internal/answer"
	"system1/internal/calibration/fitting"
	"system1/internal/cases"
	"system1/internal/config"
	"system1/internal/decisionlog"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
	"system1/internal/outcomes"
	"system1/internal/simmodel"
	"system1/internal/systemone"
	"system1/internal/testengine"
)

// shadowRig is a server over two simulated models, "good" and "worse",
// each on its own engine, with every request for good shadowed to
// worse, recording in a decision log.
type shadowRig struct {
	srv         *httptest.Server
	dlog        *decisionlog.Log
	shadow      *answer.Shadow
	traffic     []cases.Case
	good, worse *simmodel.Model
	goodEngine  *fakeengine.Fake
}

// trained is the simulated model trained on half of AG News, and 200
// cases of the other half to ask it: trained once for the tests here,
// which change only their copies.
var trained struct {
	once    sync.Once
	model   *simmodel.Model
	traffic []cases.Case
	err     error
}

func trainedSim(t *testing.T) (*simmodel.Model, []cases.Case) {
	t.Helper()
	path := testengine.SharedData(t, "agnews-dev.jsonl")
	trained.once.Do(func() {
		all, err := cases.ReadFiles(0, path)
		if err != nil {
			trained.err = err
			return
		}
		train, traffic := simmodel.Split(all, 0.5)
		trained.model, trained.err = simmodel.Train(train, simmodel.DefaultOptions())
		trained.traffic = traffic[:min(200, len(traffic))]
	})
	if trained.err != nil {
		t.Fatal(trained.err)
	}
	return trained.model, trained.traffic
}

func newShadowRig(t *testing.T) *shadowRig {
	t.Helper()
	m, traffic := trainedSim(t)
	good := new(simmodel.Model)
	*good = *m
	// The worse candidate is the same classifier served far more
	// over-confident and pulled toward the first label: wrong more often,
	// and surer when wrong.
	worse := *good
	worse.Temperature, worse.FirstBias = 0.2, 2.5
	r := &shadowRig{traffic: traffic, good: good, worse: &worse}
	var nodes []*fleet.Node
	for _, m := range []struct {
		name string
		sim  *simmodel.Model
	}{{"good", good}, {"worse", &worse}} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{m.name}, Behavior: m.sim.Behavior()})
		t.Cleanup(f.Close)
		if m.name == "good" {
			r.goodEngine = f
		}
		n, err := fleet.NewNode(config.Node{Name: m.name, URL: f.URL, Dialect: "llamacpp", Models: []string{m.name}}, func(string) string { return "" }, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	var err error
	r.dlog, err = decisionlog.Open(t.Context(), decisionlog.Options{Path: filepath.Join(t.TempDir(), "decisions.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.dlog.Close(t.Context()) })
	r.shadow = answer.NewShadow(answer.ShadowOptions{Rules: []answer.ShadowRule{{Model: "good", Candidate: "worse", Share: 1}}, Queue: 1024})
	t.Cleanup(r.shadow.Close)
	o := httpapi.Options{
		Answer:   answer.New(answer.Options{Router: fleet.New(nodes, fleet.Options{Policy: testPolicy}), Recorder: r.dlog, Shadow: r.shadow}),
		Rounding: -1, Feedback: outcomes.NewFeedback(r.dlog), DecisionLog: r.dlog,
	}
	r.srv = httptest.NewServer(httpapi.New(o))
	t.Cleanup(r.srv.Close)
	return r
}

// ask asks each case of good on /v1/systemone and reports its outcome
// on /v1/feedback when feedback is set.
func (r *shadowRig) ask(t *testing.T, cs []cases.Case, feedback bool) {
	t.Helper()
	var ids []string
	for _, c := range cs {
		req := c.Request
		req.Model = "good"
		header, _ := okReply(t, http.MethodPost, r.srv.URL+"/v1/systemone", string(systemone.AppendRequest(nil, req)))
		ids = append(ids, header.Get("X-Typesafe-Request-Id"))
	}
	if feedback {
		sendFeedback(t, r.srv.URL, cs, ids)
	}
}

// waitShadow waits until the shadow has asked or given up on every
// request it sampled.
func (r *shadowRig) waitShadow(t *testing.T) answer.ShadowStats {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := r.shadow.Stats()
		if st.Asked+st.Failed+st.Dropped == st.Sampled && st.Queued == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not finish: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	_, body := okReply(t, http.MethodGet, url, "")
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// A shadow rollout of the simulated model to a deliberately worse
// candidate: every request to good is asked of worse too, off the request
// path; both answers are logged, the candidate's under the face shadow;
// and once outcomes come back, GET /v1/shadow says to keep the served
// model because the candidate is worse, with the numbers that show it.
func TestShadowReportSaysTheWorseCandidateIsWorse(t *testing.T) {
	r := newShadowRig(t)
	cs := r.traffic
	r.ask(t, cs, true)
	st := r.waitShadow(t)
	if st.Sampled != uint64(len(cs)) || st.Asked != st.Sampled || st.Dropped != 0 || st.Failed != 0 {
		t.Fatalf("shadow stats %+v after %d requests", st, len(cs))
	}
	if err := r.dlog.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	es, err := r.dlog.Window(t.Context(), time.Now().Add(-time.Hour), time.Now().Add(time.Minute), "worse")
	if err != nil || len(es) != len(cs) {
		t.Fatalf("%d records of the candidate, %v; want %d", len(es), err, len(cs))
	}
	for _, e := range es {
		if e.Face != decisionlog.FaceShadow || !strings.HasPrefix(e.RequestID, decisionlog.ShadowPrefix) || e.Outcome != nil {
			t.Fatalf("a candidate's record: %+v", e)
		}
	}
	// The candidate's answer was never given: feedback on its id is a
	// 404, as for an id nothing answered.
	for _, body := range []string{
		fmt.Sprintf(`{"request_id":%q,"question":%q,"outcome":%q}`, es[0].RequestID, es[0].QuestionID, es[0].Options[0]),
		fmt.Sprintf(`{"request_id":%q,"outcome":%q}`, es[0].RequestID, es[0].Options[0]),
	} {
		resp, err := http.Post(r.srv.URL+"/v1/feedback", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(got), "unknown request_id") {
			t.Errorf("feedback on the shadow's answer %s: %d %s", body, resp.StatusCode, got)
		}
	}

	var rep outcomes.ShadowReport
	getJSON(t, r.srv.URL+"/v1/shadow?window=1d", &rep)
	if len(rep.Signatures) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	s := rep.Signatures[0]
	t.Logf("GET /v1/shadow: %s vs %s on %s: %s: %s", s.Model, s.Candidate, s.Signature, s.Recommendation, s.Evidence)
	if s.Model != "good" || s.Candidate != "worse" || s.N != len(cs) || s.Labelled != len(cs) || s.PrimaryScore == nil || s.CandidateScore == nil {
		t.Fatalf("report: %+v", s)
	}
	if s.Recommendation != fitting.RecommendKeep || !strings.Contains(s.Evidence, "the candidate is worse") {
		t.Fatalf("the report does not say the candidate is worse: %s: %s", s.Recommendation, s.Evidence)
	}
	if !(s.CandidateScore.NLL > s.PrimaryScore.NLL) || !(s.ConfidenceShift > 0) || !(s.Agreement < 1) || !(s.MeanAbsChange > 0) {
		t.Fatalf("the comparison's numbers: %+v", s.Comparison)
	}
}

// The same rollout to the same model under another name is no worse:
// the report says the two are equivalent, so the rule does not call any
// candidate worse.
func TestShadowReportOnAnEqualCandidate(t *testing.T) {
	r := newShadowRig(t)
	*r.worse = *r.good // the candidate now serves exactly what good does
	r.ask(t, r.traffic, true)
	r.waitShadow(t)
	var rep outcomes.ShadowReport
	getJSON(t, r.srv.URL+"/v1/shadow", &rep)
	if len(rep.Signatures) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	s := rep.Signatures[0]
	if s.Recommendation != fitting.RecommendEquivalent || s.Agreement != 1 || s.MeanAbsChange != 0 {
		t.Fatalf("an identical candidate: %s: %s (%+v)", s.Recommendation, s.Evidence, s.Comparison)
	}
}

// Label-free drift: the served model's answers change (its engine starts
// serving the over-confident, biased build) with no outcome reported;
// the calibration report's drift entry alarms for the signature, where
// the same model unchanged does not. GET /v1/calibration carries the
// entry under the configured windows.
func TestCalibrationReportsDriftWithoutOutcomes(t *testing.T) {
	r := newShadowRig(t)
	half := len(r.traffic) / 2
	r.ask(t, r.traffic, false)
	// report is the calibration report whose current window holds the
	// answers since cut, and whose reference window everything before.
	report := func(cut time.Time) outcomes.SignatureDrift {
		t.Helper()
		now := time.Now()
		rep, err := outcomes.ReportCalibrationWith(t.Context(), r.dlog, nil, outcomes.ReportOptions{Since: now.Add(-time.Hour), Until: now, Drift: outcomes.DriftOptions{Window: now.Sub(cut)}})
		if err != nil {
			t.Fatal(err)
		}
		return driftOf(t, rep, "good")
	}
	cutAfter := func() time.Time {
		if err := r.dlog.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the records before and after the cut are at distinct times
		return time.Now()
	}
	cut := cutAfter()
	r.ask(t, r.traffic[:half], false) // the same questions, unchanged: no alarm
	same := report(cut)
	if same.Alarm || same.Current != half || same.Reference != len(r.traffic) {
		t.Fatalf("drift of the unchanged model: %+v", same)
	}

	cut = cutAfter()
	r.goodEngine.Set(r.worse.Behavior())
	r.ask(t, r.traffic[half:], false)
	moved := report(cut)
	t.Logf("unchanged: PSI %.3f (confidence %.3f, labels %.3f, noise %.3f/%.3f); changed build: PSI %.3f (confidence %.3f, labels %.3f, noise %.3f/%.3f): %s",
		same.PSI, same.ConfidencePSI, same.LabelPSI, same.Noise[0], same.Noise[1], moved.PSI, moved.ConfidencePSI, moved.LabelPSI, moved.Noise[0], moved.Noise[1], moved.Reason)
	if !moved.Alarm || moved.Current != len(r.traffic)-half {
		t.Fatalf("drift after the build changed: %+v", moved)
	}

	// On the face, under the default windows: every answer is in the
	// current hour, none in the reference window, so nothing alarms.
	var rep outcomes.CalibrationReport
	getJSON(t, r.srv.URL+"/v1/calibration", &rep)
	if d := driftOf(t, rep, "good"); d.Alarm || d.Reference != 0 || d.Current != len(r.traffic)+len(r.traffic) {
		t.Fatalf("GET /v1/calibration's drift: %+v", d)
	}
}
func driftOf(t *testing.T, rep outcomes.CalibrationReport, model string) outcomes.SignatureDrift {
	t.Helper()
	for _, d := range rep.Drift {
		if d.Model == model {
			return d
		}
	}
	t.Fatalf("no drift entry for %s: %+v", model, rep.Drift)
	return outcomes.SignatureDrift{}
}

// shadowedRoutes are the routes whose answers a shadow rollout samples,
// with a request for the served model and the states it holds: every
// route that answers through answer.Service, as docs/shadow.md names them.
var shadowedRoutes = []struct {
	route, body string
	states      uint64
}{
	{"/v1/systemone", `{"model":"good","state":{"t":"one"},"questions":{"q":{"type":"noul","instructions":"?"}}}`, 1},
	{"/v1/systemone/batch", `{"model":"good","states":[{"t":"a"},{"t":"b"}],"questions":{"q":{"type":"noul","instructions":"?"}}}`, 2},
	{"/v1/decide", `{"question":"Which team?","options":["billing","tech"],"context":{"t":"one"}}`, 1},
	{"/v1/decide/batch", `{"question":"Which team?","options":["billing","tech"],"contexts":[{"t":"a"},{"t":"b"},{"t":"c"}]}`, 3},
	{"/v1/decisions", `{"model":"good","input":"one","questions":[{"type":"predicate","instructions":"?"}]}`, 1},
}

// Every route that answers the served model is shadowed, each state of a
// batch as a request of its own, and docs/shadow.md names every one.
func TestEveryAnsweringRouteIsShadowed(t *testing.T) {
	var nodes []*fleet.Node
	for _, m := range []string{"good", "worse"} {
		f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{m}})
		t.Cleanup(f.Close)
		n, err := fleet.NewNode(config.Node{Name: m, URL: f.URL, Dialect: "llamacpp", Models: []string{m}}, func(string) string { return "" }, nil)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	shadow := answer.NewShadow(answer.ShadowOptions{Rules: []answer.ShadowRule{{Model: "good", Candidate: "worse", Share: 1}}, Queue: 64})
	t.Cleanup(shadow.Close)
	cfg, err := config.Parse([]byte("gateway:\n  chain:\n    - {name: good, model: good}\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc := answer.New(answer.Options{Router: fleet.New(nodes, fleet.Options{Policy: testPolicy}), Shadow: shadow})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: svc, Rounding: -1, Decide: gateway.New(gateway.Options{Config: cfg, Answer: svc})}))
	t.Cleanup(srv.Close)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "shadow.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := &shadowRig{shadow: shadow}
	var sampled uint64
	for _, tc := range shadowedRoutes {
		okReply(t, http.MethodPost, srv.URL+tc.route, tc.body)
		st := r.waitShadow(t)
		if st.Sampled-sampled != tc.states || st.Failed != 0 || st.Dropped != 0 {
			t.Errorf("POST %s with %d states: the shadow sampled %d more (%+v)", tc.route, tc.states, st.Sampled-sampled, st)
		}
		sampled = st.Sampled
		if !strings.Contains(string(doc), "`"+tc.route+"`") {
			t.Errorf("docs/shadow.md does not name %s among the shadowed routes", tc.route)
		}
	}
}
