package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"system1/internal/decision"
)

// AskOrders answers q over orders cyclic shifts of its options (at most
// one per option; 1 or less is Ask) and averages the readings in option
// space: each shifted reading is mapped back to the caller's options
// before the mean, so that a bias toward a position or a label is spread
// over every option alike. A choice or noul shifts the options the model
// reads, with the labels in place; a score keeps its levels in their
// order (an ordered rubric read out of order is another question) and
// shifts the labels instead. Every shift starts with the same state, so
// an engine's prompt cache prefills it once and an extra order costs only
// the question's tokens. The outcome's Dist is the mean, Raw the reading
// in the caller's order, and Orders how many were asked; its Mass is the
// mean label mass when every shift reported one. Any shift's failure is
// the question's: a mean over fewer orders than asked would be a
// different step than the one named.
func AskOrders(ctx context.Context, e Engine, model string, state json.RawMessage, q decision.Question, orders int) (Outcome, error) {
	n := len(q.Options)
	orders = min(orders, n)
	if orders <= 1 {
		return Ask(ctx, e, model, state, q)
	}
	var out Outcome
	sum := make([]float64, n)
	mass := 0.0
	missing := map[string]bool{}
	for k := range orders {
		shifted, shift := q, 0
		if q.Kind == decision.Score {
			shift = k
		} else {
			shifted.Options = rotate(q.Options, k)
		}
		o, err := ask(ctx, e, model, state, shifted, shift)
		if err != nil {
			return Outcome{}, err
		}
		if len(o.Dist) != n {
			return Outcome{}, &Failure{Kind: Malformed, Err: fmt.Errorf("order %d: a distribution over %d options for %d", k+1, len(o.Dist), n)}
		}
		// Shifted option i is the caller's option i+k (a score's levels
		// never moved).
		for i, p := range o.Dist {
			j := i
			if shift == 0 {
				j = (i + k) % n
			}
			sum[j] += p
		}
		if k == 0 {
			out = o
			out.Raw = o.Dist
			out.Missing = nil
		} else {
			out.Rounds += o.Rounds
			out.Shared = out.Shared && o.Shared
			out.InputTokens += o.InputTokens
			out.OutputTokens += o.OutputTokens
			out.Estimated = out.Estimated || o.Estimated
			out.ConstraintFailed = out.ConstraintFailed || o.ConstraintFailed
		}
		mass += o.Mass
		for _, m := range o.Missing {
			missing[m] = true
		}
	}
	out.Dist = make(decision.Distribution, n)
	for i, s := range sum {
		out.Dist[i] = s / float64(orders)
	}
	if err := out.Dist.Check(n); err != nil {
		return Outcome{}, &Failure{Kind: Malformed, Err: fmt.Errorf("averaging %d orders: %w", orders, err)}
	}
	out.Mass = mass / float64(orders) // NaN when any order's was
	for _, o := range q.Options {
		if missing[o.Key] {
			out.Missing = append(out.Missing, o.Key)
		}
	}
	out.Orders = orders
	return out, nil
}

// OrderCalls is how many orders AskOrders asks a question of n options
// when orders are wanted: what an engine-call budget multiplies by.
func OrderCalls(n, orders int) int { return max(1, min(orders, n)) }

// rotate returns s shifted left by k, 0 <= k <= len(s): element i of
// the result is s[(i+k) % len(s)].
func rotate[T any](s []T, k int) []T { return slices.Concat(s[k:], s[:k]) }
