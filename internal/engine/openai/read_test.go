package openai

import (
	"math"
	"testing"
)

func TestReadSumsTheTokensThatSpellALabel(t *testing.T) {
	lp := func(v float64) *float64 { return &v }
	id := func(v int) *int { return &v }
	for _, c := range []struct {
		name   string
		top    []TokenLogprob
		labels []Label
		want   []float64 // nil: an error
	}{
		{"one token a label", []TokenLogprob{{Token: "A", Logprob: lp(-0.5)}, {Token: "B", Logprob: lp(-1.5)}},
			[]Label{{Text: "A", ID: -1}, {Text: "B", ID: -1}}, []float64{-0.5, -1.5}},
		{"two tokens spell one label", []TokenLogprob{{Token: "A", Logprob: lp(-0.7)}, {Token: "A", Logprob: lp(-0.7)}},
			[]Label{{Text: "A", ID: -1}}, []float64{math.Log(2 * math.Exp(-0.7))}},
		{"a sum over 1 within the tolerance is 1", []TokenLogprob{{Token: "0", Logprob: lp(0)}, {Token: "0", Logprob: lp(-7)}},
			[]Label{{Text: "0", ID: -1}}, []float64{0}},
		{"a sum over 1 past the tolerance", []TokenLogprob{{Token: "A", Logprob: lp(-0.1)}, {Token: "A", Logprob: lp(-0.2)}},
			[]Label{{Text: "A", ID: -1}}, nil},
		{"a label by id twice", []TokenLogprob{{Token: "A", ID: id(3), Logprob: lp(-2)}, {Token: "A", ID: id(3), Logprob: lp(-3)}},
			[]Label{{Text: "A", ID: 3}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, found, err := Read(&TokenLogprob{TopLogprobs: c.top}, c.labels)
			if c.want == nil {
				if err == nil {
					t.Fatalf("read %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				if !found[i] || math.Abs(got[i]-w) > 1e-12 {
					t.Fatalf("label %d: %v (found %v), want %v", i, got[i], found[i], w)
				}
			}
		})
	}
}
