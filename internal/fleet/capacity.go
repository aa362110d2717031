package fleet

import (
	"context"

	"system1/internal/engine/llamacpp"
)

// llama is n's llama-server, nil for any other node. Only llama-server
// says how many calls it runs at once (its slots, -np, which bound it
// below the node's max_inflight), and only it holds slots for states.
func (n *Node) llama() *llamacpp.Engine {
	if b, ok := n.Backend.(*engineBackend); ok {
		e, _ := b.e.(*llamacpp.Engine)
		return e
	}
	return nil
}

// slotted is n's llama-server when its slots bound n's calls: nil for
// any other node, and for a pool, whose router spreads the calls over
// servers each reporting only its own slots (max_inflight bounds a pool).
func (n *Node) slotted() *llamacpp.Engine {
	if n.Pool {
		return nil
	}
	return n.llama()
}

// knownSlots is how many engine calls n runs at once, as far as it is
// known without a call: its max_inflight, or fewer where its engine said
// it runs fewer.
func (n *Node) knownSlots() int {
	s := cap(n.slots.sem)
	if e := n.slotted(); e != nil {
		if k := e.KnownSlots(); k > 0 {
			s = min(s, k)
		}
	}
	return s
}

// readSlots is knownSlots after asking the engine, when it has not said
// yet.
func (n *Node) readSlots(ctx context.Context) int {
	if e := n.slotted(); e != nil && e.KnownSlots() == 0 {
		ctx, cancel := context.WithTimeout(ctx, n.Timeout)
		defer cancel()
		_ = e.Slots(ctx)
	}
	return n.knownSlots()
}

// RowSlots is how many of a node's s slots a request of k questions
// holds at once: one per question, up to its share of the node, half of
// the slots (see share). A node of s slots is full with ceil(s / RowSlots)
// such requests. It is the rule clients that read /health's slots apply
// too (internal/jobs), which a test holds to this one.
func RowSlots(s, k int) int { return max(1, min(k, s/2)) }

// Capacity is how many requests of k questions over model, asked as
// row-wise work (engine.WithThroughput), the healthy nodes serving it run
// at once with every slot busy: s for a node of s slots (State.Slots)
// whose engine holds a slot per state (llama.cpp), whose questions then
// go one after another; ceil(s / RowSlots(s, k)) for any other, which
// asks a request's questions at once. It asks a llama.cpp node its slots
// when it has not said them yet. 0 when no healthy node serves the model.
func (r *Router) Capacity(ctx context.Context, model string, k int) int {
	now := r.now()
	rows := 0
	for _, n := range r.withModel(r.Serving(model), r.Resolve(model)) {
		if !n.State(now).Healthy {
			continue
		}
		s := n.readSlots(ctx)
		if n.llama() != nil {
			rows += s
			continue
		}
		per := RowSlots(s, k)
		rows += (s + per - 1) / per
	}
	return rows
}

// held is how many of n's slots states hold now (row-wise work).
func (n *Node) held() int {
	if e := n.llama(); e != nil {
		return e.HeldSlots()
	}
	return 0
}
