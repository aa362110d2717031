package fleet

import (
	"context"
	"encoding/json"

	"system1/internal/engine/llamacpp"
)

// primer is an engine that can copy a state's slot where a request's
// other questions load it (the llamacpp dialect's Prime).
type primer interface {
	Prime(ctx context.Context, state json.RawMessage, k int) error
}

var _ primer = (*llamacpp.Engine)(nil)

// prime, on a backend that spreads a state's k questions over slots, has
// the engine copy its idle slots into its prompt cache and ready the
// slots the questions go to, before they go, through the request's gate
// so that each priming task holds one of the node's slots like any call.
// A failed prime costs only the sharing: each question then prefills the
// state on its own slot, so its error is not the questions'.
func (b *engineBackend) prime(c *caller, state json.RawMessage, k int) {
	p, ok := b.e.(primer)
	if !b.spread || !ok {
		return
	}
	_ = p.Prime(c.ctx, state, k)
}
