package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"system1/internal/decision"
	"system1/internal/engine"
)

// modelEngine is a multi-model engine: models it has not got answer 404,
// and unranked models report none of the labels among their alternatives.
type modelEngine struct {
	fakeEngine
	missing  map[string]bool
	unranked map[string]bool
}

func (e *modelEngine) Read(ctx context.Context, model string, p engine.Prompt) (engine.Reading, error) {
	switch {
	case e.missing[model]:
		e.fakeEngine.Read(ctx, model, p) // counted
		return engine.Reading{}, engine.StatusFailure(404, 0, "model \""+model+"\" not found, try pulling it first")
	case e.unranked[model]:
		e.fakeEngine.Read(ctx, model, p)
		r := engine.Reading{Model: model, PreMask: true}
		for range p.Asked() {
			r.Logprobs = append(r.Logprobs, math.Inf(-1))
			r.Found = append(r.Found, false)
		}
		return r, nil
	}
	return e.fakeEngine.Read(ctx, model, p)
}

func modelRouter(e *modelEngine, models ...string) (*Router, *clock) {
	n := &Node{Name: "multi", Dialect: "ollama", Backend: EngineBackend(e, false), MaxOptions: 20, Timeout: time.Second, claimed: models}
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	r := New([]*Node{n}, Options{})
	r.now = c.now
	return r, c
}

// A 404 for one model on a multi-model engine cools that model on the
// node, not the node: the other model keeps answering, and the missing one
// is not asked again until its cooldown ends.
func TestMissingModelCoolsOnlyThatModel(t *testing.T) {
	e := &modelEngine{missing: map[string]bool{"ghost": true}}
	r, clk := modelRouter(e, "stories", "ghost")
	for i := range 3 {
		want := "model ghost cooling down" // not asked again
		if i == 0 {
			want = "HTTP 404"
		}
		if a := decide(t, r, choiceRequest("ghost", 3)); a.Err == nil || !strings.Contains(a.Err.Error(), want) {
			t.Fatalf("ghost, try %d: %v; want %q", i+1, a.Err, want)
		}
		if a := decide(t, r, choiceRequest("stories", 3)); a.Err != nil || a.Node != "multi" {
			t.Fatalf("stories after %d ghost requests: node %q, %v", i+1, a.Node, a.Err)
		}
	}
	if got := e.count(); got != 1+3 {
		t.Fatalf("%d engine calls; want ghost once, then only stories", got)
	}
	s := r.nodes[0].State(clk.now())
	if !s.Healthy || len(s.ModelCooldowns) != 1 || s.ModelCooldowns[0].Model != "ghost" || !strings.Contains(s.ModelCooldowns[0].Reason, "404") {
		t.Fatalf("state %+v; want the node healthy and ghost cooling on it", s)
	}
	a := decide(t, r, choiceRequest("ghost", 3))
	if a.Err == nil || !strings.Contains(a.Err.Error(), "model ghost cooling down") {
		t.Fatalf("ghost while cooling: %v", a.Err)
	}
	clk.advance(DefaultPolicy.Cooldown)
	decide(t, r, choiceRequest("ghost", 3))
	if got := e.count(); got != 1+3+1 {
		t.Fatalf("%d engine calls; ghost should be tried again once its cooldown ended", got)
	}
}

// A reading in which the model ranked none of the labels fails the
// question without a number made up, names the labels the model never
// ranked, and does not count against the node however often it happens.
func TestUnrankedLabelsDoNotCoolTheNode(t *testing.T) {
	e := &modelEngine{unranked: map[string]bool{"stories": true}}
	r, clk := modelRouter(e, "stories", "other")
	for i := range 2 * DefaultPolicy.AllowedFails {
		a := decide(t, r, choiceRequest("stories", 3))
		f := engine.Classify(a.Err)
		if f == nil || f.Kind != engine.Malformed || !f.Uninformative {
			t.Fatalf("try %d: %v; want a malformed, uninformative failure", i+1, a.Err)
		}
		for _, want := range []string{"no label has any probability", `"A" ("a")`, `"B" ("b")`, `"C" ("c")`} {
			if !strings.Contains(a.Err.Error(), want) {
				t.Fatalf("try %d: %q does not name %s", i+1, a.Err, want)
			}
		}
		if s := r.nodes[0].State(clk.now()); !s.Healthy || len(s.ModelCooldowns) > 0 {
			t.Fatalf("after %d unranked readings: %+v", i+1, s)
		}
	}
	if a := decide(t, r, choiceRequest("other", 3)); a.Err != nil || a.Node != "multi" {
		t.Fatalf("an unrelated question: node %q, %v", a.Node, a.Err)
	}
}

// questionEngine fails each question by its instructions: a question
// whose prompt holds a key of fail gets that failure.
type questionEngine struct {
	fakeEngine
	fail map[string]error
}

func (e *questionEngine) Read(ctx context.Context, model string, p engine.Prompt) (engine.Reading, error) {
	for k, err := range e.fail {
		if strings.Contains(p.Question, k) {
			e.fakeEngine.Read(ctx, model, p) // counted
			return engine.Reading{}, err
		}
	}
	return e.fakeEngine.Read(ctx, model, p)
}

// A node's failure on one question of a request cools it as the policy
// says whatever the request's other questions did: a question the engine
// rejected as the caller's, or one the model ranked no label of, says
// nothing of the node, and neither hides another question's failure,
// before or after it.
func TestCooldownWhateverTheQuestionOrder(t *testing.T) {
	down := engine.StatusFailure(500, 0, "boom")
	for _, tc := range []struct {
		name  string
		other error
	}{
		{"rejected", engine.StatusFailure(400, 0, "the request exceeds the available context size")},
		{"unranked", &engine.Failure{Kind: engine.Malformed, Uninformative: true, Err: errors.New("no label has any probability")}},
	} {
		for _, downFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, down first %v", tc.name, downFirst), func(t *testing.T) {
				e := &questionEngine{fail: map[string]error{"crash": down, "other": tc.other}}
				n := &Node{Name: "n", Backend: EngineBackend(e, false), MaxOptions: 20, Timeout: time.Second, claimed: []string{"m"}}
				r := New([]*Node{n}, Options{})
				clk := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
				r.now = clk.now
				req := choiceRequest("m", 3)
				q := req.Questions[0]
				crash, other := q, q
				crash.ID, crash.Instructions = "crash", json.RawMessage(`"crash"`)
				other.ID, other.Instructions = "other", json.RawMessage(`"other"`)
				req.Questions = []decision.Question{other, crash}
				if downFirst {
					req.Questions = []decision.Question{crash, other}
				}
				if _, err := r.Decide(context.Background(), req); err != nil {
					t.Fatal(err)
				}
				if s := n.State(clk.now()); s.Healthy {
					t.Fatalf("the node answered a question with HTTP 500 and is still healthy: %+v", s)
				}
			})
		}
	}
}
