package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
)

// A constrained engine's reading is post-mask only when the token it
// generated is a label; otherwise the constraint did not hold, and the
// values are read as from before it, so their mass on the labels shows.
func TestReadingConstraintThatDidNotHold(t *testing.T) {
	reply := func(generated string) *ChatResponse {
		body := fmt.Sprintf(`{"model":"m","choices":[{"logprobs":{"content":[{"token":%q,"logprob":%v,"top_logprobs":[
			{"token":"Hello","logprob":%v},{"token":"A","logprob":%v},{"token":"B","logprob":%v}]}]}}]}`,
			generated, math.Log(0.6), math.Log(0.6), math.Log(0.3), math.Log(0.1))
		var r ChatResponse
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	labels := []Label{{Text: "A", ID: -1}, {Text: "B", ID: -1}}
	for _, tc := range []struct {
		generated string
		failed    bool
	}{{"A", false}, {"Hello", true}} {
		r, err := Reading(reply(tc.generated), labels, false)
		if err != nil {
			t.Fatal(err)
		}
		if mass := math.Exp(r.Logprobs[0]) + math.Exp(r.Logprobs[1]); math.Abs(mass-0.4) > 1e-9 {
			t.Errorf("generated %q: label values sum to %v, want the raw 0.4", tc.generated, mass)
		}
		if r.ConstraintFailed != tc.failed || r.PreMask != tc.failed {
			t.Errorf("generated %q: constraint failed %v, pre-mask %v; want both %v", tc.generated, r.ConstraintFailed, r.PreMask, tc.failed)
		}
	}
}
