package fleet

import (
	"context"
	"fmt"
	"time"

	"system1/internal/engine"
)

// ConstraintStates are the states of a node's constraint, in the order
// health documents them.
var ConstraintStates = []string{ConstraintHolds, ConstraintFailed, ConstraintUnprobed, ConstraintNone}

// The states of a node's constraint, as health reports them.
const (
	// ConstraintNone: the node holds no first token to the labels, so
	// there is nothing to hold: llama.cpp and Ollama report values from
	// before their grammar, an openai node without constrain reads them
	// unmasked, a System One upstream reads for itself.
	ConstraintNone = "not_constrained"
	// ConstraintUnprobed: a constrained node not yet probed (not used
	// yet, its probe under way or failed to get an answer, or back after
	// being down).
	ConstraintUnprobed = "unprobed"
	// ConstraintHolds: the probe's generated token was one of its labels.
	ConstraintHolds = "holds"
	// ConstraintFailed: the node generated a token that is no label,
	// under the probe or in an answer: its constraint is ignored.
	ConstraintFailed = "failed"
)

// ConstraintState is what is known of whether a node holds its
// constraint.
type ConstraintState struct {
	State  string    `json:"state" jsonschema:"holds (the probe's token was a label), failed (the node generated a token that is no label: it ignores its constraint, and its answers are read as before it), unprobed (not used yet, probe under way or unanswered, or back after being down) or not_constrained (nothing to hold: llama.cpp and Ollama report values before their grammar)."`
	Method string    `json:"method,omitempty" jsonschema:"The node's constrain setting: structured_outputs or guided_choice."`
	Model  string    `json:"model,omitempty" jsonschema:"The model the state was learnt from."`
	At     time.Time `json:"at,omitzero" jsonschema:"When it was learnt."`
	Detail string    `json:"detail,omitempty" jsonschema:"How it was learnt (the probe or an answer), or why the probe got no answer."`
}

// ConstraintProbe is the prompt a constrained node is probed with. It
// asks for something other than a label, so that an engine that ignores
// the constraint very likely generates the natural answer ("blue"), which
// is no label, while one that holds it can only generate Q or X: letters
// that neither start the natural answer nor appear in the prompt.
var ConstraintProbe = engine.Prompt{
	System:    "You are a helpful assistant. Answer the user's request directly, in one lowercase word.",
	StatePart: "Write the English word for the colour of a clear daytime sky, and nothing else.",
	Labels:    []string{"Q", "X"},
}

// constraint is a node's constraint state, under the node's lock.
type constraint struct {
	ConstraintState
	probing bool      // a probe is under way
	retryAt time.Time // a probe that got no answer is not retried before
}

// constrained marks a node whose engine is to hold the first token to
// the labels, and starts its state unprobed.
func (n *Node) constrained(method string) {
	n.constraint = constraint{ConstraintState: ConstraintState{State: ConstraintUnprobed, Method: method, Detail: "not probed yet: the probe is sent when the node is first used"}}
}

func (n *Node) constraintLocked() ConstraintState {
	if n.constraint.State == "" {
		return ConstraintState{State: ConstraintNone}
	}
	return n.constraint.ConstraintState
}

// probeConstraint sends the constraint probe to a constrained node that
// has not been probed, once at a time, in the background, after the
// calls of the request that used the node: it never delays or fails that
// request. It holds one of the node's slots (or waits in its queue), like
// any engine call, and is bounded by the node's timeout (nodes[].timeout),
// whatever the caller's deadline. A probe that gets no answer (the node
// busy, down or slow) is sent again on a use after the policy's cooldown.
func (r *Router) probeConstraint(n *Node, b *engineBackend, model string) {
	now := r.now()
	n.mu.Lock()
	c := &n.constraint
	if c.State != ConstraintUnprobed || c.probing || now.Before(c.retryAt) {
		n.mu.Unlock()
		return
	}
	c.probing = true
	n.mu.Unlock()
	go func() {
		probe, err := b.e.Read(engine.WithGate(context.Background(), gate{n: n}), model, ConstraintProbe)
		at := r.now()
		n.mu.Lock()
		defer n.mu.Unlock()
		c.probing = false
		switch {
		case c.State != ConstraintUnprobed:
			// An answer showed it failed while the probe was out.
		case err != nil:
			c.retryAt = at.Add(r.policy.Cooldown)
			c.Detail = fmt.Sprintf("the probe got no answer (%v); it is sent again on a use after %s", engine.Classify(err), r.policy.Cooldown)
		case !probe.ConstraintFailed:
			c.State, c.Model, c.At = ConstraintHolds, model, at
			c.Detail = "the probe's generated token was one of its labels"
		default:
			c.failed(model, at, "the probe's")
		}
	}()
}

// constraintFailed records an answer of model's whose generated token
// was no label: proof, unlike a token that was one, that the node
// ignores its constraint.
func (r *Router) constraintFailed(n *Node, model string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := &n.constraint
	if c.State != "" && c.State != ConstraintFailed {
		c.failed(model, r.now(), "an answer's")
	}
}

// failed records that whose (the probe's, an answer's) generated token,
// of model at at, was no label.
func (c *constraint) failed(model string, at time.Time, whose string) {
	c.State, c.Model, c.At = ConstraintFailed, model, at
	c.Detail = whose + " generated token was no label: the engine ignores " + c.Method + ", so its answers are read as before the constraint"
}

// constraintUnknown forgets what was learnt of a node's constraint when
// it goes down: what comes back may be another engine or version (the
// very change that makes vLLM ignore a constraint), so it is probed again
// on its next use. Under the node's lock.
func (n *Node) constraintUnknown(why string) {
	c := &n.constraint
	if c.State != ConstraintHolds && c.State != ConstraintFailed {
		return
	}
	last := c.State
	c.ConstraintState = ConstraintState{State: ConstraintUnprobed, Method: c.Method,
		Detail: fmt.Sprintf("probed again on its next use: it went down (%s) after its constraint was found %s", why, last)}
}
