package fleet

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"system1/internal/decision"
)

// TestCorrections holds the one resolution of a request's corrections:
// the request's own choice over the router's setting, the defaults filled
// in; the orders a question is asked over follow it.
func TestCorrections(t *testing.T) {
	three := decision.Question{ID: "q", Options: make([]decision.Option, 3)}
	for _, tc := range []struct {
		name           string
		debias         Debias
		prior          Prior
		req            decision.Request
		want           Corrections
		questionOrders int
	}{
		{"router's defaults", Debias{}, Prior{}, decision.Request{},
			Corrections{Orders: decision.DefaultDebiasOrders, Prior: decision.PriorOff}, 1},
		{"router permutes", Debias{Permute: true, Orders: 2}, Prior{Mode: decision.PriorContentFree}, decision.Request{},
			Corrections{Permute: true, Orders: 2, Prior: decision.PriorContentFree}, 2},
		{"request turns both off", Debias{Permute: true}, Prior{Mode: decision.PriorBatch}, decision.Request{Debias: decision.DebiasOff, Prior: decision.PriorOff},
			Corrections{Orders: decision.DefaultDebiasOrders, Prior: decision.PriorOff}, 1},
		{"request asks for both", Debias{}, Prior{}, decision.Request{Debias: decision.DebiasPermute, Prior: decision.PriorBatch},
			Corrections{Permute: true, Orders: decision.DefaultDebiasOrders, Prior: decision.PriorBatch}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(nil, Options{Debias: tc.debias, Prior: tc.prior})
			if got := r.Corrections(tc.req); got != tc.want {
				t.Errorf("Corrections = %+v, want %+v", got, tc.want)
			}
			if got := r.debias.orders(tc.req, three); got != tc.questionOrders {
				t.Errorf("orders of a question of 3 options = %d, want %d", got, tc.questionOrders)
			}
		})
	}
}

// TestBatchSignatureAsFormatted holds the hand-built batch signature to the
// fmt form it replaced, so that a running estimate keeps its key.
func TestBatchSignatureAsFormatted(t *testing.T) {
	for _, c := range []struct {
		model, fp string
		q         decision.Question
		orders    int
	}{
		{"m", "", decision.Question{Kind: decision.Choice, Options: make([]decision.Option, 3), Instructions: []byte("Which?")}, 1},
		{"a-long-model-name:with/odd\x00bytes", "sha256:0123456789abcdef", decision.Question{Kind: decision.Noul, Instructions: []byte(strings.Repeat("long ", 100))}, 12},
		{"", "", decision.Question{}, 0},
	} {
		h := sha256.Sum256(c.q.Instructions)
		want := fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%x", c.model+"\x00"+c.fp, c.q.Kind, len(c.q.Options), c.orders, h[:16])
		if got := batchSignature(c.model, c.fp, c.q, c.orders); got != want {
			t.Errorf("batchSignature = %q, want %q", got, want)
		}
	}
}
