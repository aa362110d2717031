package httpapi_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/calibration"
	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/httpapi"
	"system1/internal/systemone"
)

// calRequest asks one question of each kind; the fake engine gives the
// labels 0.6, 0.3 and 0.1 (the noul's two renormalised: 2/3, 1/3).
const calRequest = `{"model":"fake","state":"Ticket: charged twice.","questions":{` +
	`"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":null,"technical":null,"sales":null}},` +
	`"urgent":{"type":"noul","instructions":"Urgent?"},` +
	`"anger":{"type":"score","criteria":["calm","annoyed","angry"]}}}`

// calServe runs system1's HTTP face over one fake llama.cpp engine with
// the given fits (nil: calibration off), reporting full precision so that
// the numbers can be compared exactly.
func calServe(t *testing.T, fits *calibration.Fits) string {
	t.Helper()
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.6, 0.3, 0.1)}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{n}, fleet.Options{})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: router, Fits: func() *calibration.Fits { return fits }}), Rounding: -1}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// calAsk posts calRequest and reads the reply with every client's checks.
func calAsk(t *testing.T, url string) (http.Header, *systemone.Reply, decision.Request) {
	t.Helper()
	header, body := okReply(t, http.MethodPost, url+"/v1/systemone", calRequest)
	req := systemone.ParseRequest([]byte(calRequest)).Request
	reply, err := systemone.ParseResponse(req, body) // the Jev shape, as every client checks it
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	return header, reply, req
}

// engineDists are the distributions the fake engine gives calRequest's
// questions.
var engineDists = []decision.Distribution{{0.6, 0.3, 0.1}, {2.0 / 3, 1.0 / 3}, {0.6, 0.3, 0.1}}

// wantAnswers checks that each answer is what decision.NewAnswer makes of
// the engine's distribution tempered by temps[i] (1: untouched).
func wantAnswers(t *testing.T, req decision.Request, got *systemone.Reply, temps []float64) {
	t.Helper()
	near := func(what string, a, b float64) {
		t.Helper()
		if math.Abs(a-b) > 1e-9 {
			t.Errorf("%s: got %v, want %v", what, a, b)
		}
	}
	for i, q := range req.Questions {
		want, err := decision.NewAnswer(q, engineDists[i].Temper(temps[i]), -1)
		if err != nil {
			t.Fatal(err)
		}
		g := got.Answers[i]
		near(q.ID+" noul", g.Noul, want.Noul)
		near(q.ID+" score", g.Score, want.Score)
		near(q.ID+" confidence", g.Confidence, want.Confidence)
		if g.Choice != want.Choice {
			t.Errorf("%s: choice %q, want %q", q.ID, g.Choice, want.Choice)
		}
		for j := range want.Probabilities {
			near(q.ID+" probability "+q.Options[j].Key, g.Probabilities[j], want.Probabilities[j])
		}
	}
}

func TestSystemOneCalibration(t *testing.T) {
	fit := func(model string, kind decision.Kind, bucket string, temp float64) calibration.Fit {
		return calibration.Fit{Model: model, Kind: kind, Bucket: bucket, Temperature: temp}
	}
	all := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{
		fit("fake", decision.Choice, "3-4", 2),
		fit("fake", decision.Noul, "2", 0.5),
		fit("fake", decision.Score, "3-4", 3),
		fit("fake", decision.Choice, "5-10", 9), // another bucket: never used here
	}}
	if err := all.Validate(); err != nil {
		t.Fatal(err)
	}

	t.Run("off: what the engine reported, no header", func(t *testing.T) {
		h, reply, req := calAsk(t, calServe(t, nil))
		if _, ok := h["X-System1-Calibrated"]; ok {
			t.Errorf("calibration is off, yet x-system1-calibrated: %q", h.Get("X-System1-Calibrated"))
		}
		wantAnswers(t, req, reply, []float64{1, 1, 1})
		if got := h.Get("X-System1-Steps"); got != "none" {
			t.Errorf("no step applied, yet x-system1-steps %q", got)
		}
	})

	t.Run("a fit for every question", func(t *testing.T) {
		h, reply, req := calAsk(t, calServe(t, all))
		if got := h.Get("X-System1-Calibrated"); got != "true" {
			t.Errorf("x-system1-calibrated %q", got)
		}
		if w := h.Get("X-System1-Warnings"); w != "" {
			t.Errorf("warnings %q", w)
		}
		wantAnswers(t, req, reply, []float64{2, 0.5, 3})
		if got, want := h.Get("X-System1-Steps"), "dept: temperature=v1/T=2; urgent: temperature=v1/T=0.5; anger: temperature=v1/T=3"; got != want {
			t.Errorf("x-system1-steps %q, want %q", got, want)
		}
		// By hand: T=0.5 squares the noul's odds, (2/3)² / ((2/3)² + (1/3)²) = 0.8.
		if math.Abs(reply.Answers[1].Noul-0.8) > 1e-9 {
			t.Errorf("noul %v, want 0.8", reply.Answers[1].Noul)
		}
		if reply.Model != "fake" {
			t.Errorf("model %q", reply.Model)
		}
	})

	t.Run("a fit for the choice only", func(t *testing.T) {
		some := &calibration.Fits{Version: calibration.FitsVersion, Fits: all.Fits[:1]}
		h, reply, req := calAsk(t, calServe(t, some))
		if got := h.Get("X-System1-Calibrated"); got != "false" {
			t.Errorf("x-system1-calibrated %q; not every answer was calibrated", got)
		}
		w := h.Get("X-System1-Warnings")
		if !strings.Contains(w, "urgent: no calibration fit for model fake, noul over 2 options") || !strings.Contains(w, "anger: no calibration fit") || strings.Contains(w, "dept") {
			t.Errorf("warnings %q", w)
		}
		wantAnswers(t, req, reply, []float64{2, 1, 1})
		if got, want := h.Get("X-System1-Steps"), "dept: temperature=v1/T=2; urgent: none; anger: none"; got != want {
			t.Errorf("x-system1-steps %q, want %q: only the applied step is named", got, want)
		}
	})

	t.Run("fits for another model", func(t *testing.T) {
		other := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{fit("jev-1.13.0", decision.Choice, "3-4", 2)}}
		h, reply, req := calAsk(t, calServe(t, other))
		if got := h.Get("X-System1-Calibrated"); got != "false" {
			t.Errorf("x-system1-calibrated %q", got)
		}
		wantAnswers(t, req, reply, []float64{1, 1, 1})
	})
}

// A score's confidence map gives the predicted level the probability its
// outcomes say; where that level is one the engine did not report (its
// label was not among the top log-probabilities, and the warning says it
// was reported 0), the map has no reading to correct, and the level must
// stay 0 rather than get a probability no model gave it.
func TestSystemOneScoreMapLeavesAnUnreportedLevelAtZero(t *testing.T) {
	f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.5, 0, 0.5)}})
	t.Cleanup(f.Close)
	n, err := fleet.NewNode(config.Node{Name: "n", URL: f.URL, Dialect: "llamacpp", Models: []string{fakeengine.DefaultModel}},
		func(string) string { return "" }, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	fits := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{{Model: "fake", Kind: decision.Score, Bucket: "3-4", Temperature: 1,
		ConfidenceMap: &calibration.ConfidenceMap{X: []float64{0, 0.5}, Y: []float64{0.3, 0.6}}}}}
	if err := fits.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{}),
		Fits: func() *calibration.Fits { return fits }}), Rounding: -1}))
	t.Cleanup(srv.Close)
	const body = `{"model":"fake","state":"Ticket: charged twice.","questions":{"anger":{"type":"score","criteria":["calm","annoyed","angry"]}}}`
	h, b := okReply(t, http.MethodPost, srv.URL+"/v1/systemone", body)
	reply, err := systemone.ParseResponse(systemone.ParseRequest([]byte(body)).Request, b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if w := h.Get("X-System1-Warnings"); !strings.Contains(w, "reported 0") {
		t.Errorf("warnings %q: the unreported level is not named", w)
	}
	if p := reply.Answers[0].Probabilities; p[1] != 0 {
		t.Errorf("level 1, which the engine did not report, has probability %v (%v), not 0\n%s", p[1], p, b)
	}
	if s := reply.Answers[0].Score; math.Abs(s-1) > 1e-9 {
		t.Errorf("score %v, want 1", s)
	}
}

// An answer is calibrated only where a calibrator was applied: with fits
// loaded for the model, a request whose every question the node declined
// had nothing calibrated, and X-System1-Calibrated says false, as decide's
// calibrated does; one answered question of three, fitted, says true.
func TestCalibratedOnlyWhereSomethingWasCalibrated(t *testing.T) {
	fits := &calibration.Fits{Version: calibration.FitsVersion, Fits: []calibration.Fit{
		{Model: "fake", Kind: decision.Choice, Bucket: "3-4", Temperature: 2},
		{Model: "fake", Kind: decision.Noul, Bucket: "2", Temperature: 2},
		{Model: "fake", Kind: decision.Score, Bucket: "3-4", Temperature: 2},
	}}
	for _, tc := range []struct {
		refuse []string
		want   string
	}{
		{[]string{"dept", "urgent", "mood"}, "false"},
		{[]string{"urgent", "mood"}, "true"},
	} {
		d := fakeengine.StartDecisions(t, fakeengine.Reply{Model: fakeengine.DefaultModel, Probs: []float64{0.2, 0.7, 0.1}, Refuse: tc.refuse})
		n, err := fleet.NewNode(config.Node{Name: "n", URL: d.URL, Dialect: "decisions", Models: []string{fakeengine.DefaultModel}},
			func(string) string { return "" }, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: fleet.New([]*fleet.Node{n}, fleet.Options{}),
			Fits: func() *calibration.Fits { return fits }})}))
		t.Cleanup(srv.Close)
		h, body := okReply(t, http.MethodPost, srv.URL+"/v1/decisions", ticketDecisions)
		if got := h.Get("X-System1-Calibrated"); got != tc.want {
			t.Errorf("%d of 3 questions declined: X-System1-Calibrated %q, want %q\n%s", len(tc.refuse), got, tc.want, body)
		}
	}
}
