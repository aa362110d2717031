package httpapi_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"system1/internal/answer"
	"system1/internal/config"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/httpapi"
)

const aboutBeta = `{"model":"fake","state":"about beta","questions":{"c":{"type":"choice","instructions":"Which?","criteria":{"alpha":null,"beta":null,"gamma":null}}}}`

// On /v1/systemone, X-System1-Prior chooses the prior correction of one
// request: content_free makes one extra call over the empty state, then
// reads it from the cache, and divides it out (the first-position bias
// gone); batch applies once prior_min_requests answers of the question
// were seen, naming how many; with debiasing the steps come in order.
// The steps header names each; bad values and a repeated header are a
// 422 naming the header.
func TestSystemOnePriorHeader(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.Leaning})
	s := serve(t, setup{nodes: []node{n}, prior: fleet.Prior{MinRequests: 4}})
	for _, tc := range []struct {
		headers []string
		steps   string
		calls   int
		beta    float64 // the answer's probability of beta; 0: not checked
	}{
		{nil, "none", 1, 0.375}, // 3 / (4+3+1)
		{[]string{"X-System1-Prior: off"}, "none", 1, 0.375},
		{[]string{"X-System1-Prior: content_free"}, "prior=content_free/empty_state", 2, 0.6}, // [4,3,1] / [4,1,1]
		{[]string{"X-System1-Prior: Content_Free"}, "prior=content_free/empty_state", 1, 0.6},
		// Four answers of this very state were seen, so their mean divides it to uniform.
		{[]string{"X-System1-Prior: batch"}, "prior=batch/n=4/window=256", 1, 1. / 3},
		// A debiased answer is of another signature, not yet warm.
		{[]string{"X-System1-Prior: batch", "X-System1-Debias: permute"}, "debias=permute/3", 3, 0},
		// The mean over the shifts (3/8, 12/14, 3/8)/3; the debiased content-free reading is uniform.
		{[]string{"X-System1-Prior: content_free", "X-System1-Debias: permute"}, "debias=permute/3; prior=content_free/empty_state", 6, (3./8 + 12./14 + 3./8) / 3},
	} {
		n.fake.Reset()
		r := s.ask(t, aboutBeta, tc.headers...)
		if got := r.header.Get("X-System1-Steps"); got != tc.steps {
			t.Errorf("%q: steps %q, want %q", tc.headers, got, tc.steps)
		}
		if got := len(n.fake.Inferences()); got != tc.calls {
			t.Errorf("%q: %d engine calls, want %d", tc.headers, got, tc.calls)
		}
		if p := probabilities(t, r)["beta"]; tc.beta > 0 && math.Abs(p-tc.beta) > 0.006 {
			t.Errorf("%q: beta %v, want %v", tc.headers, p, tc.beta)
		}
	}
	want422(t, s.ask(t, aboutBeta, "X-System1-Prior: sometimes"), "X-System1-Prior", "header", "X-System1-Prior")
	want422(t, s.ask(t, aboutBeta, "X-System1-Prior: "), "X-System1-Prior", "header", "X-System1-Prior")
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/systemone", strings.NewReader(aboutBeta))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-System1-Prior", "batch")
	req.Header.Add("X-System1-Prior", "batch")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "X-System1-Prior") {
		t.Errorf("the header twice: %d %s", resp.StatusCode, body)
	}
}

// prior: content_free in the configuration applies to every request
// that does not say otherwise.
func TestSystemOnePriorConfigured(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.Leaning})
	s := serve(t, setup{nodes: []node{n}, prior: fleet.Prior{Mode: "content_free"}})
	if got := s.ask(t, aboutBeta).header.Get("X-System1-Steps"); got != "prior=content_free/empty_state" {
		t.Errorf("configured: steps %q", got)
	}
	if got := s.ask(t, aboutBeta, "X-System1-Prior: off").header.Get("X-System1-Steps"); got != "none" {
		t.Errorf("off: steps %q", got)
	}
}

// POST /v1/decide takes prior in its body, over the same router as
// /v1/systemone, so the two faces share one batch estimate per replica:
// answers on /v1/systemone warm the estimate a decide request then
// finds. content_free costs one extra engine call, then is cached.
func TestDecidePriorOverHTTP(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: fakeengine.Leaning})
	fn, err := fleet.NewNode(n.cfg, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	router := fleet.New([]*fleet.Node{fn}, fleet.Options{Policy: testPolicy, Prior: fleet.Prior{MinRequests: 2}})
	cfg, err := config.Parse([]byte("gateway: {threshold: 0}\nproviders:\n  - {name: local, kind: engine, model: fake}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Answer: answer.New(answer.Options{Router: router}), Rounding: 2,
		Decide: gateway.New(gateway.Options{Config: cfg, Answer: answer.New(answer.Options{Router: router})})}))
	t.Cleanup(srv.Close)
	s := &system1{URL: srv.URL, client: &http.Client{Transport: checker{t: t, base: http.DefaultTransport}}}
	body := func(prior string) string {
		return `{"question":"Which?","options":["alpha","beta","gamma"],"context":{"note":"about beta"},"prior":"` + prior + `"}`
	}
	steps := func(r reply) (string, float64) {
		t.Helper()
		if r.status != http.StatusOK {
			t.Fatalf("status %s", r)
		}
		var res gateway.Response
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range res.Calibration.Steps {
			out = append(out, st.Name+"="+st.Version)
		}
		beta, _ := res.Probabilities.Get("beta")
		return strings.Join(out, ","), beta
	}
	if got, _ := steps(s.do(t, http.MethodPost, "/v1/decide", body("batch"))); got != "" {
		t.Errorf("batch before any answer: steps %q", got)
	}
	s.ask(t, aboutBeta) // the same question on /v1/systemone: the second answer of its signature
	if got, beta := steps(s.do(t, http.MethodPost, "/v1/decide", body("batch"))); got != "prior=batch/n=2/window=256" || math.Abs(beta-1./3) > 0.0011 {
		t.Errorf("batch after two answers on both faces: steps %q, beta %v", got, beta)
	}
	for _, calls := range []int{2, 1} {
		n.fake.Reset()
		got, beta := steps(s.do(t, http.MethodPost, "/v1/decide", body("content_free")))
		if got != "prior=content_free/empty_state" || math.Abs(beta-0.6) > 0.0011 || len(n.fake.Inferences()) != calls {
			t.Errorf("content_free: steps %q, beta %v after %d calls, want %d", got, beta, len(n.fake.Inferences()), calls)
		}
	}
	r := s.do(t, http.MethodPost, "/v1/decide", body("sometimes"))
	if !strings.Contains(string(r.body), `prior must be`) {
		t.Errorf("a bad prior: %s", r)
	}
}

// A content-free reading that leaves a label out of the engine's top
// log-probabilities gives that option no prior at all, only a bound: the
// model said nothing of how much it leans toward it. Dividing by a
// made-up floor (1e-6) handed the answer to the option the engine gave
// 0.01; without a prior for every option, none is divided out, and the
// steps say so.
func TestSystemOneContentFreePriorWithAnUnreportedLabel(t *testing.T) {
	n := startNode(t, "a", fakeengine.LlamaCpp, fakeengine.Behavior{Prompted: func(r fakeengine.Request) []float64 {
		if p, _ := fakeengine.ParsePrompt(r.User); strings.Contains(p.State, "about") {
			return fakeengine.Probs(0.6, 0.39, 0.01)(r.Labels)
		}
		return fakeengine.Probs(0.7, 0.3)(r.Labels) // gamma's label not reported over the empty state
	}})
	s := serve(t, setup{nodes: []node{n}})
	r := s.ask(t, aboutBeta, "X-System1-Prior: content_free")
	p := probabilities(t, r)
	if p["gamma"] > 0.5 {
		t.Errorf("gamma, which the engine gave 0.01, has %v: %s (steps %q)", p["gamma"], r, r.header.Get("X-System1-Steps"))
	}
	if got := r.header.Get("X-System1-Steps"); got != "none" {
		t.Errorf("steps %q, want none: no prior was divided out", got)
	}
}
