package openai

import (
	"math"
	"testing"
)

// Floor is the n-th highest value reported, whatever their order, the
// lowest when n or fewer are, and -Inf when none are.
func TestFloor(t *testing.T) {
	top := func(lps ...float64) *TokenLogprob {
		tok := &TokenLogprob{}
		for _, lp := range lps {
			tok.TopLogprobs = append(tok.TopLogprobs, TokenLogprob{Logprob: &lp})
		}
		tok.TopLogprobs = append(tok.TopLogprobs, TokenLogprob{Token: "no value"})
		return tok
	}
	for _, tc := range []struct {
		name string
		tok  *TokenLogprob
		n    int
		want float64
	}{
		{"the second of four", top(-3, -1, -4, -2), 2, -2},
		{"the fourth of four", top(-3, -1, -4, -2), 4, -4},
		{"fewer than n", top(-3, -1, -4, -2), 64, -4},
		{"n of 0: the lowest", top(-3, -1), 0, -3},
		{"none", top(), 2, math.Inf(-1)},
	} {
		if got := Floor(tc.tok, tc.n); got != tc.want {
			t.Errorf("%s: Floor = %v, want %v", tc.name, got, tc.want)
		}
	}
}
