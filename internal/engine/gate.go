package engine

import (
	"context"
	"time"
)

// Gate admits and bounds a node's engine calls. The fleet puts one in the
// context of the calls it makes to a node; a dialect enters it around
// every call that runs the model (a reading, each round and each order of
// one, a llama.cpp priming task), so that each call holds one of the
// node's slots for as long as it runs, and each is bounded by the node's
// timeout, however many calls one question makes.
type Gate interface {
	// Enter waits for a slot for one call, returning the function that
	// gives it back. Its error is a *Failure of kind Busy when the node
	// had no slot in time, or the context's.
	Enter(ctx context.Context) (done func(), err error)
	// Timeout bounds one call once it has its slot.
	Timeout() time.Duration
}

type gateKey struct{}

// WithGate returns ctx carrying g for the engine calls made under it.
func WithGate(ctx context.Context, g Gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

func gate(ctx context.Context) Gate {
	g, _ := ctx.Value(gateKey{}).(Gate)
	return g
}

// Admit waits for ctx's gate to admit one call, returning the function
// that ends it; with no gate it admits at once.
func Admit(ctx context.Context) (done func(), err error) {
	g := gate(ctx)
	if g == nil {
		return func() {}, nil
	}
	return g.Enter(ctx)
}

// Bound bounds one engine call by ctx's gate's timeout; with no gate it
// leaves ctx as it is. Calls that run no model (a tokenizer, a server's
// properties) are bounded the same way without taking a slot.
func Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	g := gate(ctx)
	if g == nil || g.Timeout() <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, g.Timeout())
}

// Call runs f as one engine call: admitted by ctx's gate, then bounded
// by its timeout.
func Call(ctx context.Context, f func(context.Context) error) error {
	done, err := Admit(ctx)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := Bound(ctx)
	defer cancel()
	return f(ctx)
}
