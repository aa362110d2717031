package config

import "fmt"

// A pool node (Node.Pool) is one URL in front of several engines of one
// dialect, whose own router picks the engine for each call, by the
// prompt's prefix where it is prefix-aware. system1 then treats the URL
// as one node for health, cooldowns and max_inflight, and leaves the
// choice of engine to the pool: it pins nothing to an engine's slots
// (llama.cpp's id_slot and the tasks that prime them are one server's),
// bounds nothing by one engine's slots, and sends each question's whole
// prompt, so that the pool's router sees every call as it is.

// checkPool refuses pool on a node it cannot apply to, and the slot
// settings it turns off; at names the node in the file.
func (n Node) checkPool(at string) []error {
	if !n.Pool {
		return nil
	}
	var errs []error
	if n.Dialect == "systemone" {
		errs = append(errs, fmt.Errorf("%s.pool (%s): a systemone node forwards each request whole, in one call, and its endpoint routes it; pool is for the engine dialects (llamacpp, ollama, openai)", at, n.Name))
	}
	for _, s := range []struct {
		key string
		on  *bool
	}{{"pin_slots", n.PinSlots}, {"spread_slots", n.SpreadSlots}} {
		if s.on != nil && *s.on {
			errs = append(errs, fmt.Errorf("%s.%s (%s): a pool's engines each have their own slots, and its router picks the engine, so a slot cannot be pinned through it; leave %s out of a pool node", at, s.key, n.Name, s.key))
		}
	}
	return errs
}
