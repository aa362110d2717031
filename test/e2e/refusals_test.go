package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"system1/internal/fakeengine"
)

// Refusals are counted by model and reason through the built binary
// (system1_refusals_total): a model that ranks none of the labels, on
// /v1/systemone (its 422) and /v1/decisions (its refusals), and the
// request's own gate; a decision cache hit, which asked nothing, is not
// counted again.
func TestRefusalsCountedThroughTheBinary(t *testing.T) {
	blank := fakeengine.New(fakeengine.Options{Dialect: fakeengine.OpenAI, Models: []string{"blank"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs()}})
	t.Cleanup(blank.Close)
	good := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Models: []string{"good"}, Behavior: fakeengine.Behavior{Logprobs: fakeengine.Probs(0.5, 0.3, 0.2)}})
	t.Cleanup(good.Close)
	cfg := fmt.Sprintf(`fingerprint: {off: true}
nodes:
  - {name: nb, url: %s, dialect: openai, models: [blank]}
  - {name: ng, url: %s, dialect: llamacpp, models: [good]}
cache: {entries: 100}
`, blank.URL, good.URL)
	c := client()
	s := startServe(t, cfg, serveOpts{})
	two := func(model string) string {
		return `{"model":"` + model + `","state":"a ticket","questions":{` +
			`"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":null,"technical":null,"sales":null}},` +
			`"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`
	}
	for range 2 { // the second is a cache hit
		if r := do(t, c, http.MethodPost, s.URL+"/v1/systemone", "", two("blank")); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("/v1/systemone over blank: %d %s", r.Status, r.Body)
		}
	}
	if r := do(t, c, http.MethodPost, s.URL+"/v1/decisions", "", `{"model":"blank","input":"a ticket","questions":[{"type":"predicate","name":"urgent","instructions":"Is it urgent?"}]}`); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"type":"refusal"`) {
		t.Fatalf("/v1/decisions over blank: %d %s", r.Status, r.Body)
	}
	// The gate: the noul question's two labels hold 0.8 of the reading,
	// under 0.9; the choice's three hold all of it.
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/systemone", strings.NewReader(two("good")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-System1-Min-Label-Mass", "0.9")
	gated, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(gated.Body)
	gated.Body.Close()
	if gated.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "questions.urgent: system1 will not stand behind this answer: no option seemed to fit") ||
		strings.Contains(string(body), "questions.dept") {
		t.Fatalf("/v1/systemone over good, gated: %d %s; want urgent alone refused", gated.StatusCode, body)
	}

	m := string(do(t, c, http.MethodGet, s.URL+"/metrics", "", "").Body)
	for _, want := range []string{
		`system1_refusals_total{model="blank",reason="unranked"} 3`,
		`system1_refusals_total{model="good",reason="label_mass"} 1`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics has no %q:\n%s", want, grep(m, "system1_refusals_total"))
		}
	}
}
