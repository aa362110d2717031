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

type throughputKey struct{}

// WithThroughput marks the calls made under ctx as row-wise work, one of
// many states asked at once to keep every slot of the engines busy (a
// batch, a job): an engine keeping a prompt cache per slot then holds a
// slot for each state and asks its questions there one after another,
// instead of spreading one state's questions over several slots, which
// only pays when the other slots would be idle.
func WithThroughput(ctx context.Context) context.Context {
	return context.WithValue(ctx, throughputKey{}, true)
}

// Throughput reports whether ctx's calls are row-wise work
// (WithThroughput).
func Throughput(ctx context.Context) bool {
	on, _ := ctx.Value(throughputKey{}).(bool)
	return on
}
