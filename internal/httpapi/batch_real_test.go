package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"system1/internal/config"
	"system1/internal/testengine"
)

// On the real llama-server (the shared tiny model, 4 slots) the batch
// route's answer for each state is the answer /v1/systemone gives that
// state alone, field by field: the batch holds a slot per state and asks
// its questions one after another there, the single request spreads them
// over the slots, and neither changes what the model says beyond the
// engine's batch noise: a value within one rounding step (0.01), as a
// score of 1.075 rounds to 1.07 alone and 1.08 batched with other slots.
// More states than slots, so that slots are held, given back and taken
// again.
func TestBatchEqualsSingleOnRealEngine(t *testing.T) {
	eng := testengine.Start(t, 4)
	n := node{cfg: config.Node{Name: "tiny", URL: eng.URL, Dialect: "llamacpp", Models: []string{testengine.Model}, Timeout: config.Duration(2 * time.Minute)}}
	s := serve(t, setup{nodes: []node{n}, requestTimeout: 5 * time.Minute})
	var states []string
	for i := range 10 {
		st, _ := json.Marshal(fmt.Sprintf("Once upon a time %d little %s went to the %s.", i,
			[]string{"cats", "dogs", "birds"}[i%3], []string{"park", "sea", "forest", "town"}[i%4]))
		states = append(states, string(st))
	}
	states = append(states, `{"who":"Lily","did":"found a big red ball"}`, `["Tom was sad.","He cried."]`)
	body := fmt.Sprintf(`{"model":%q,"states":[%s],"questions":%s}`, testengine.Model, strings.Join(states, ","), batchQuestions)
	r := s.do(t, http.MethodPost, "/v1/systemone/batch", body)
	if r.status != http.StatusOK {
		t.Fatal(r)
	}
	var got batchReply
	if err := json.Unmarshal(r.body, &got); err != nil || len(got.Results) != len(states) {
		t.Fatalf("%v: %s", err, r.body)
	}
	distinct := map[string]bool{}
	for i, st := range states {
		single := fmt.Sprintf(`{"model":%q,"state":%s,"questions":%s}`, testengine.Model, st, batchQuestions)
		alone := s.ask(t, single)
		if alone.status != http.StatusOK {
			t.Fatalf("state %d alone: %s", i, alone)
		}
		a, b := withoutLatency(t, got.Results[i]), withoutLatency(t, alone.body)
		if !withinRounding(t, a, b) {
			t.Errorf("state %d:\nbatch %s\nalone %s", i, got.Results[i], alone.body)
		}
		distinct[string(a["answers"])] = true
	}
	// The comparison sees the states: the model does not answer them all
	// alike.
	if len(distinct) < 2 {
		t.Errorf("every state got the same answers, %v: the comparison could not tell states apart", distinct)
	}
}

// withinRounding says whether two replies have the same fields and values,
// their numbers within one step of /v1/systemone's rounding (0.01).
func withinRounding(t *testing.T, a, b map[string]json.RawMessage) bool {
	t.Helper()
	decode := func(m map[string]json.RawMessage) any {
		raw, _ := json.Marshal(m)
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var same func(x, y any) bool
	same = func(x, y any) bool {
		switch x := x.(type) {
		case float64:
			y, ok := y.(float64)
			return ok && math.Abs(x-y) <= 0.01+1e-9
		case map[string]any:
			y, ok := y.(map[string]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if w, ok := y[k]; !ok || !same(v, w) {
					return false
				}
			}
			return true
		case []any:
			y, ok := y.([]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for i := range x {
				if !same(x[i], y[i]) {
					return false
				}
			}
			return true
		default:
			return x == y
		}
	}
	return same(decode(a), decode(b))
}
