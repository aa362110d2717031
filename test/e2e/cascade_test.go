package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"system1/internal/calibration"
	"system1/internal/decision"
	"system1/internal/fakeengine"
	"system1/internal/fleet"
	"system1/internal/gateway"
	"system1/internal/outcomes"
)

// cascadeFakes are a weak stage, "small", sure of an "easy" state,
// ranking no label of a "blank" one and unsure of any other, and a
// strong one, "large", that always answers technical: which stage
// answered shows in the answer itself.
func cascadeFakes(t *testing.T) (small, large *fakeengine.Fake) {
	logs := func(p ...float64) []float64 {
		out := make([]float64, len(p))
		for i, v := range p {
			out[i] = math.Log(v)
		}
		return out
	}
	small = fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"small"}, Build: "one", Behavior: fakeengine.Behavior{
		Prompted: func(r fakeengine.Request) []float64 {
			if strings.Contains(r.User, "easy") {
				return logs(0.96, 0.02, 0.02)
			}
			if strings.Contains(r.User, "blank") {
				return logs(0, 0, 0) // out of the top log-probabilities
			}
			return logs(0.5, 0.3, 0.2)
		}}})
	large = fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"large"}, Build: "one",
		Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.1, 0.85, 0.05)}})
	t.Cleanup(small.Close)
	t.Cleanup(large.Close)
	return small, large
}

// writeEscalation writes a fits file certifying small's build
// fingerprint at threshold 0.9 for the cascade's target error.
func writeEscalation(t *testing.T, path, fingerprint string) {
	t.Helper()
	writeFitsFile(t, path, "r-"+fingerprint, calibration.Fit{Model: "small", Fingerprint: fingerprint, Kind: decision.Choice, Bucket: calibration.Bucket(3), Temperature: 1, N: 300,
		Escalations: []calibration.Escalation{{TargetError: 0.05, Delta: calibration.EscalationDelta, Threshold: 0.9, Certified: true, N: 300, Kept: 200, WrongKept: 2, UpperBound: 0.03}}})
}

// A cascade through the built binary: on /v1/systemone each question is
// kept by the first stage when its confidence clears the stage's
// certified threshold and escalated to the second otherwise, in one
// request (X-System1-Escalated, X-System1-Served); /v1/decide names the
// stage that answered; /v1/models lists the cascade with its stages;
// feedback on an escalated question trains both stages; and when the
// first stage's build changes, its certification is gone and every
// question escalates.
func TestCascadeThroughTheBinary(t *testing.T) {
	small, large := cascadeFakes(t)
	dir := t.TempDir()
	fits := filepath.Join(dir, "fits.json")
	writeEscalation(t, fits, "not-yet-known")
	cfg := fmt.Sprintf(`nodes:
  - {name: ns, url: %s, dialect: llamacpp, models: [small], price: {input_per_mtok: 1, output_per_mtok: 1}}
  - {name: nl, url: %s, dialect: llamacpp, models: [large], price: {input_per_mtok: 1, output_per_mtok: 1}}
probe_every: 1s
fingerprint: {canary_every: 10m}
calibration: {mode: apply}
cascades:
  - {model: casc, stages: [small, large], target_error: 0.05}
gateway:
  fits: %s
  threshold: 0
  chain:
    - {name: local, model: casc}
decision_log:
  path: %s
`, small.URL, large.URL, fits, filepath.Join(dir, "decisions.db"))
	c := client()
	s := startServe(t, cfg, serveOpts{})

	if r := do(t, c, http.MethodGet, s.URL+"/v1/models", "", ""); !strings.Contains(string(r.Body), `"casc"`) || !strings.Contains(string(r.Body), "cascade of small, large") {
		t.Fatalf("/v1/models: %s", r.Body)
	}
	const two = `{"model":"casc","state":"a ticket","questions":{"easy":{"type":"choice","instructions":"easy: which team?","criteria":{"billing":null,"technical":null,"sales":null}},"hard":{"type":"choice","instructions":"hard: which team?","criteria":{"billing":null,"technical":null,"sales":null}}}}`
	ask := func() reply {
		t.Helper()
		r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", two)
		if r.Status != http.StatusOK {
			t.Fatalf("/v1/systemone: %d %s", r.Status, r.Body)
		}
		return r
	}
	// Until the fits name small's build, nothing is certified and every
	// question escalates.
	if r := ask(); r.Header.Get("X-System1-Escalated") != "easy=true; hard=true" {
		t.Fatalf("uncertified: escalated %q", r.Header.Get("X-System1-Escalated"))
	} else {
		// Every stage asked is billed: at a dollar a million tokens on
		// both nodes, the cost is the usage of both stages, which the
		// reply sums.
		var u struct {
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(r.Body, &u); err != nil {
			t.Fatal(err)
		}
		cost, err := strconv.ParseFloat(r.Header.Get("X-System1-Cost"), 64)
		tokens := u.Usage.InputTokens + u.Usage.OutputTokens
		if err != nil || tokens == 0 || math.Abs(cost-float64(tokens)/1e6) > 1e-12 {
			t.Fatalf("a cascade that asked both stages costs %q for %d tokens (%v)", r.Header.Get("X-System1-Cost"), tokens, err)
		}
	}
	fp := buildOf(t, s, "ns", "small")
	writeEscalation(t, fits, fp)
	var r reply
	for deadline := time.Now().Add(30 * time.Second); ; {
		// The fits file is looked at once a second.
		if r = ask(); r.Header.Get("X-System1-Escalated") == "easy=false; hard=true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the certification was never applied: escalated %q", r.Header.Get("X-System1-Escalated"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	served := r.Header.Get("X-System1-Served")
	if !strings.Contains(served, "easy: node=ns model=small") || !strings.Contains(served, "hard: node=nl model=large") {
		t.Fatalf("served %q", served)
	}
	var body struct {
		Answers map[string]struct {
			Choice string `json:"choice"`
		} `json:"answers"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Answers["easy"].Choice != "billing" || body.Answers["hard"].Choice != "technical" {
		t.Fatalf("the easy question is small's (billing), the hard one large's (technical): %s (%v)", r.Body, err)
	}
	// The Decisions wire says the same in the same header.
	dec := do(t, c, http.MethodPost, s.URL+"/v1/decisions", "", `{"model":"casc","input":"a ticket","questions":[`+
		`{"type":"choice","instructions":"easy: which team?","choices":[{"value":"billing"},{"value":"technical"},{"value":"sales"}]},`+
		`{"type":"choice","instructions":"hard: which team?","choices":[{"value":"billing"},{"value":"technical"},{"value":"sales"}]}]}`)
	if h := dec.Header.Get("X-System1-Escalated"); dec.Status != http.StatusOK || strings.Count(h, "=false") != 1 || strings.Count(h, "=true") != 1 {
		t.Fatalf("/v1/decisions: %d, escalated %q: %s", dec.Status, h, dec.Body)
	}
	// A batch answers each state as its own request: the easy question
	// is small's in every state, the hard one large's.
	batch := do(t, c, http.MethodPost, s.URL+"/v1/systemone/batch", "", strings.Replace(two, `"state":"a ticket"`, `"states":["a ticket","another ticket"]`, 1))
	if batch.Status != http.StatusOK || strings.Count(string(batch.Body), `"choice":"billing"`) != 2 || strings.Count(string(batch.Body), `"choice":"technical"`) != 2 {
		t.Fatalf("batch: %d %s", batch.Status, batch.Body)
	}
	// The escalated question reached large alone, in one call.
	last := large.Inferences()[len(large.Inferences())-1]
	if strings.Contains(last.User, "easy") {
		t.Fatalf("the kept question was asked of the second stage: %q", last.User)
	}

	decide := func(q string) gateway.Response {
		t.Helper()
		r := do(t, c, http.MethodPost, s.URL+"/v1/decide", "", fmt.Sprintf(`{"question":%q,"options":["billing","technical","sales"]}`, q))
		var res gateway.Response
		if err := json.Unmarshal(r.Body, &res); err != nil || res.Status != gateway.Decided || res.Served == nil {
			t.Fatalf("decide: %d %s", r.Status, r.Body)
		}
		return res
	}
	if res := decide("easy: which team?"); res.Served.Stage != "small" || strings.Join(res.Served.Stages, ",") != "small" || *res.Decision != "billing" {
		t.Fatalf("decide, easy: %+v", res.Served)
	}
	// A question the first stage ranked no label of is the next stage's,
	// as one under its threshold is.
	if res := decide("blank: which team?"); res.Served.Stage != "large" || strings.Join(res.Served.Stages, ",") != "small,large" || *res.Decision != "technical" {
		t.Fatalf("decide, blank: %+v", res.Served)
	}
	res := decide("hard: which team?")
	if res.Served.Stage != "large" || strings.Join(res.Served.Stages, ",") != "small,large" || *res.Decision != "technical" {
		t.Fatalf("decide, hard: %+v", res.Served)
	}

	// Feedback on the escalated decide answer trains both stages.
	if fb := do(t, c, http.MethodPost, s.URL+"/v1/feedback", "", fmt.Sprintf(`{"request_id":%q,"outcome":"technical"}`, res.RequestID)); fb.Status != http.StatusOK {
		t.Fatalf("feedback: %d %s", fb.Status, fb.Body)
	}
	var rep outcomes.CalibrationReport
	if cr := do(t, c, http.MethodGet, s.URL+"/v1/calibration", "", ""); json.Unmarshal(cr.Body, &rep) != nil {
		t.Fatalf("/v1/calibration: %d %s", cr.Status, cr.Body)
	}
	trained := map[string]int{}
	for _, b := range rep.Buckets {
		trained[b.Model] += b.Outcomes
	}
	if trained["small"] != 1 || trained["large"] != 1 {
		t.Fatalf("outcomes per stage %v, want one for each", trained)
	}
	// The cascade's report: one question with an outcome, asked of both
	// stages and answered, right, by the second; small's threshold is
	// certified for its build.
	if len(rep.Cascades) != 1 {
		t.Fatalf("cascades reported: %+v", rep.Cascades)
	}
	cr := rep.Cascades[0]
	if cr.Model != "casc" || cr.Questions != 1 || len(cr.Stages) != 2 || cr.Stages[0].Asked != 1 || cr.Stages[0].Answered != 0 ||
		cr.Stages[1].Answered != 1 || cr.Stages[1].Share != 1 || cr.Stages[1].Wrong != 0 || cr.Stages[1].UpperBound <= 0 {
		t.Fatalf("cascade report %+v", cr)
	}
	if th := cr.Stages[0].Thresholds; len(th) != 1 || th[0].Fingerprint != fp || !th[0].Certified || th[0].Threshold != 0.9 {
		t.Fatalf("small's thresholds %+v", th)
	}
	// Its one decision cost what decide said, both stages asked: 1,000 of
	// them cost 1,000 times that; always asking large alone, less.
	if res.Cost == nil || cr.CostPer1000 == nil || cr.LastStageCostPer1000 == nil {
		t.Fatalf("decide's cost %v, the report's %v and %v", res.Cost, cr.CostPer1000, cr.LastStageCostPer1000)
	}
	one, err1 := decision.ParseUSD(*res.Cost)
	per1000, err2 := decision.ParseUSD(*cr.CostPer1000)
	always, err3 := decision.ParseUSD(*cr.LastStageCostPer1000)
	if err1 != nil || err2 != nil || err3 != nil || cr.Decisions != 1 || per1000 != one*1000 || always <= 0 || always >= per1000 {
		t.Fatalf("decide cost %s; 1,000 decisions %s, always large %s over %d decisions", *res.Cost, *cr.CostPer1000, *cr.LastStageCostPer1000, cr.Decisions)
	}

	// small's build changes: its certification is gone.
	small.SetBuild("two")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if r = ask(); r.Header.Get("X-System1-Escalated") == "easy=true; hard=true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the certification outlived the build: escalated %q", r.Header.Get("X-System1-Escalated"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if buildOf(t, s, "ns", "small") == fp {
		t.Fatal("every question escalates, but the build did not change")
	}
}

// buildOf waits until /health names the build node serves under model,
// and returns its fingerprint.
func buildOf(t *testing.T, s *server, node, model string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var h struct {
			Nodes []fleet.State `json:"nodes"`
		}
		if err := json.Unmarshal(do(t, client(), http.MethodGet, s.URL+"/health", "", "").Body, &h); err != nil {
			t.Fatal(err)
		}
		for _, n := range h.Nodes {
			for _, f := range n.Fingerprints {
				if n.Name == node && f.Model == model && f.ID != "" {
					return f.ID
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health never named the build of %s on %s", model, node)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
