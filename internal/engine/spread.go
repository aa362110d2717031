package engine

import "context"

type spreadKey struct{}

// WithSpread marks a call as the i-th of a request's questions over one
// state on one node, so that an engine keeping a prompt cache per slot can
// give each question its own slot next to the state's (see the llamacpp
// dialect's SpreadSlots).
func WithSpread(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, spreadKey{}, i)
}

// Spread is the index WithSpread gave the call; 0 when none.
func Spread(ctx context.Context) int {
	i, _ := ctx.Value(spreadKey{}).(int)
	return max(i, 0)
}
