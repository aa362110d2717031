package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"system1/internal/config"
	"system1/internal/decision"
	"system1/internal/fakeengine"
)

// manyQuestions is a request of k yes/no questions over one state.
func manyQuestions(model, state string, k int) decision.Request {
	req := decision.Request{Model: model, State: json.RawMessage(fmt.Sprintf("%q", state))}
	for i := range k {
		req.Questions = append(req.Questions, decision.Question{ID: fmt.Sprintf("q%d", i), Kind: decision.Noul,
			Instructions: json.RawMessage(fmt.Sprintf(`"question %d?"`, i)), Options: decision.NoulOptions(nil, nil)})
	}
	return req
}

// calls is what the engine saw, in order: "slot N" for a question pinned
// to slot N, "prime" for a priming task.
func calls(t *testing.T, f *fakeengine.Fake) []string {
	t.Helper()
	var out []string
	for _, r := range f.Requests() {
		switch {
		case r.Inference:
			var body struct {
				IDSlot *int `json:"id_slot"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.IDSlot == nil {
				out = append(out, "unpinned")
			} else {
				out = append(out, fmt.Sprintf("slot %d", *body.IDSlot))
			}
		case r.Path == "/completion":
			out = append(out, "prime")
		}
	}
	return out
}

// A pinned llama.cpp node spreads a state's questions: over a new state
// the first goes alone to the state's slot, a priming task follows, then
// the rest go at once to the slots after it; over a state seen just
// before, the priming task comes first and every question goes at once.
// With spread_slots false they all go to the state's slot.
func TestSpreadSlots(t *testing.T) {
	for _, spread := range []bool{true, false} {
		t.Run(fmt.Sprint("spread=", spread), func(t *testing.T) {
			f := fakeengine.New(fakeengine.Options{Dialect: fakeengine.LlamaCpp, Slots: 4})
			defer f.Close()
			n, err := NewNode(config.Node{Name: "llama", URL: f.URL, Dialect: "llamacpp", SpreadSlots: &spread}, func(string) string { return "" }, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			r := NewRouter([]*Node{n}, nil, DefaultPolicy, nil)
			ctx := context.Background()
			r.Discover(ctx)
			req := manyQuestions(fakeengine.DefaultModel, "a state", 3)
			for round, want := range []string{"cold", "warm"} {
				f.Reset()
				res, err := r.Decide(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				for i, a := range res.Questions {
					if a.Err != nil {
						t.Fatalf("%s: question %d: %v", want, i, a.Err)
					}
				}
				got := calls(t, f)
				if len(got) == 0 {
					t.Fatalf("%s: no calls", want)
				}
				var first int
				seen := map[string]bool{}
				for _, c := range got {
					if _, err := fmt.Sscanf(c, "slot %d", &first); err == nil {
						break
					}
				}
				for _, c := range got {
					seen[c] = true
				}
				slot := func(i int) string { return fmt.Sprintf("slot %d", (first+i)%4) }
				switch {
				case !spread:
					if len(got) != 3 || len(seen) != 1 || !seen[slot(0)] {
						t.Fatalf("%s: calls %v, want every question on one slot and no priming", want, got)
					}
				case round == 0:
					if len(got) != 4 || got[0] != slot(0) || got[1] != "prime" || !seen[slot(1)] || !seen[slot(2)] {
						t.Fatalf("cold: calls %v, want %s, prime, then %s and %s", got, slot(0), slot(1), slot(2))
					}
				default:
					if len(got) != 4 || got[0] != "prime" || len(seen) != 4 {
						t.Fatalf("warm: calls %v, want prime, then three slots", got)
					}
				}
			}
		})
	}
}
