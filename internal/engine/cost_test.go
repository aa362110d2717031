package engine

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"system1/internal/decision"
)

// countingEngine reads every label with a distinct probability and counts
// its calls.
type countingEngine struct {
	per   int
	calls atomic.Int64 // rounds after the first run concurrently
}

func (e *countingEngine) Read(_ context.Context, model string, p Prompt) (Reading, error) {
	e.calls.Add(1)
	r := Reading{Model: model, PreMask: true}
	for i := range p.Asked() {
		r.Logprobs = append(r.Logprobs, -float64(i+1)/10)
		r.Found = append(r.Found, true)
	}
	return r, nil
}
func (e *countingEngine) Models(context.Context) ([]string, error) { return nil, nil }
func (e *countingEngine) Labels(_ context.Context, _ string, c []string, want int) ([]string, error) {
	return c[:min(want, len(c))], nil
}
func (e *countingEngine) Caps() Caps { return Caps{PerCall: e.per, Subsets: true} }

// Calls says exactly how many calls Ask makes, for every option count up
// to 255 over the per-call caps of the dialects and a few odd ones.
func TestCallsIsWhatAskDoes(t *testing.T) {
	for _, per := range []int{0, 2, 3, 19, 20, 36, 64} {
		for n := 2; n <= 255; n++ {
			q := decision.Question{ID: "q", Kind: decision.Choice}
			for i := range n {
				k := string(rune('a'+i%26)) + string(rune('a'+i/26))
				q.Options = append(q.Options, decision.Option{Key: k, Name: k})
			}
			e := &countingEngine{per: per}
			out, err := Ask(context.Background(), e, "m", json.RawMessage(`"s"`), q)
			if err != nil {
				t.Fatalf("per %d, %d options: %v", per, n, err)
			}
			if got := Calls(n, per); int64(got) != e.calls.Load() || got != out.Rounds {
				t.Fatalf("per %d, %d options: Calls %d, Ask made %d calls in %d rounds", per, n, got, e.calls.Load(), out.Rounds)
			}
		}
	}
	if got := Calls(255, 20); got != 14 {
		t.Errorf("255 options at 20 labels a call: %d calls, want 14", got)
	}
	if got := Calls(77, 20); got != 4 {
		t.Errorf("77 options at 20 labels a call: %d calls, want 4", got)
	}
}
