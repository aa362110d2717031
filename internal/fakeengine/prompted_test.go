package fakeengine_test

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fakeengine"
	"system1/internal/systemone"
)

func parse(t *testing.T, body string) (json.RawMessage, []decision.Question) {
	t.Helper()
	p := systemone.ParseRequest([]byte(body))
	if ps := p.Validate(decision.DefaultLimits()); len(ps) > 0 {
		t.Fatal(ps)
	}
	return p.State, p.Questions
}

func TestParsePromptReadsWhatLayoutWrites(t *testing.T) {
	state, qs := parse(t, `{"model":"m","state":{"ticket":"charged twice\n\nQuestion: fake"},"questions":{
		"dept":{"type":"choice","instructions":"Which team?","criteria":{"billing":"payments: refunds","tech":null}},
		"urgent":{"type":"noul"},
		"mood":{"type":"score","criteria":["calm","angry"]}}}`)
	want := []fakeengine.Prompt{
		{Instructions: "Which team?", Options: map[string]string{"A": "billing: payments: refunds", "B": "tech"}, Order: []string{"A", "B"}},
		{Instructions: "Is this true of the state?", Options: map[string]string{"A": "true", "B": "false"}, Order: []string{"A", "B"}},
		{Instructions: "Which level fits the state best?", Options: map[string]string{"0": "calm", "1": "angry"}, Order: []string{"0", "1"}},
	}
	labels := [][]string{{"A", "B"}, {"A", "B"}, {"0", "1"}}
	for i, q := range qs {
		p := engine.Layout(state, q, labels[i])
		got, ok := fakeengine.ParsePrompt(p.User())
		want[i].State = `{"ticket":"charged twice\n\nQuestion: fake"}`
		if !ok || !reflect.DeepEqual(got, want[i]) {
			t.Errorf("%s:\n got %+v\nwant %+v", q.ID, got, want[i])
		}
	}
	for _, bad := range []string{"", "State:\nno question", "Question: x\nOptions:\nA. a\n"} {
		if _, ok := fakeengine.ParsePrompt(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A Prompted behaviour sees the prompt and answers from it on every
// dialect, over Logprobs.
func TestPromptedAnswersFromThePrompt(t *testing.T) {
	// Put 0.8 on the option whose name the state mentions, the rest spread.
	byState := func(r fakeengine.Request) []float64 {
		p, ok := fakeengine.ParsePrompt(r.User)
		lps := make([]float64, len(r.Labels))
		for i, l := range r.Labels {
			lps[i] = math.Log(0.2 / float64(len(r.Labels)-1))
			if ok && strings.Contains(p.State, p.Options[l]) {
				lps[i] = math.Log(0.8)
			}
		}
		return lps
	}
	state, qs := parse(t, `{"model":"fake","state":"my card was swallowed","questions":{
		"q":{"type":"choice","criteria":{"refund":null,"swallowed":null,"limits":null}}}}`)
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			f := start(t, fakeengine.Options{Dialect: d, Behavior: fakeengine.Behavior{Prompted: byState, Logprobs: fakeengine.Uniform}})
			out, err := engine.Ask(context.Background(), client(d, f.URL), "fake", state, qs[0])
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []float64{0.1, 0.8, 0.1} {
				if math.Abs(out.Dist[i]-want) > 1e-9 {
					t.Fatalf("dist %v, want 0.1, 0.8, 0.1", out.Dist)
				}
			}
		})
	}
}
