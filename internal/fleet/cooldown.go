package fleet

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"system1/internal/engine"
)

// modelCooldown is a (node, model) pair resting: the node is fine, this
// model on it is not.
type modelCooldown struct {
	until  time.Time
	reason string
}

// ModelCooldown is one model resting on a healthy node.
type ModelCooldown struct {
	Model  string    `json:"model"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// blame records a failure of node n serving model, and cools down what it
// points at. A 404 on a call for one model is that model's problem on a
// multi-model engine (Ollama answers 404 for a model it has not pulled):
// the pair rests, not the node, so a caller naming a missing model cannot
// keep the node down for every other model. A reading in which the model
// ranked none of the labels is honest and well-formed: it counts against
// nothing. Everything else is the node's, by the policy (see failed).
func (r *Router) blame(n *Node, model string, f *engine.Failure) {
	switch {
	case f.Uninformative:
		return
	case f.Kind == engine.Unavailable && f.Status == http.StatusNotFound:
		r.coolModel(n, model, r.policy.Cooldown, f.Error())
		return
	}
	r.failed(n, f)
}

// coolModel rests model on n for d.
func (r *Router) coolModel(n *Node, model string, d time.Duration, why string) {
	until := r.now().Add(d)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.modelCool == nil {
		n.modelCool = map[string]modelCooldown{}
	}
	if c, ok := n.modelCool[model]; !ok || until.After(c.until) {
		n.modelCool[model] = modelCooldown{until: until, reason: why}
	}
}

// modelResting reports whether model rests on n at now, and why.
func (n *Node) modelResting(model string, now time.Time) (modelCooldown, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.modelCool[model]
	if ok && !now.Before(c.until) {
		delete(n.modelCool, model)
		return modelCooldown{}, false
	}
	return c, ok
}

// modelCooldowns lists the models resting on n at now, by name; the
// caller holds n.mu.
func (n *Node) modelCooldowns(now time.Time) []ModelCooldown {
	var out []ModelCooldown
	for m, c := range n.modelCool {
		if now.Before(c.until) {
			out = append(out, ModelCooldown{Model: m, Until: c.until, Reason: c.reason})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// withModel leaves out of nodes those on which model rests.
func (r *Router) withModel(nodes []*Node, model string) []*Node {
	now := r.now()
	return slices.DeleteFunc(slices.Clone(nodes), func(n *Node) bool {
		_, resting := n.modelResting(model, now)
		return resting
	})
}

// resting explains why node n takes no question for model at now.
func (r *Router) resting(n *Node, model string, now time.Time) string {
	if c, ok := n.modelResting(model, now); ok {
		return fmt.Sprintf("%s: model %s cooling down until %s (%s)", n.Name, model, c.until.Format(time.RFC3339), c.reason)
	}
	s := n.State(now)
	if s.Healthy { // passed over: another node could take what this one could not
		return fmt.Sprintf("%s not tried: the question's options or the request's engine calls are over its max_options or max_engine_calls", s.Name)
	}
	return fmt.Sprintf("%s cooling down until %s (%s)", s.Name, s.CoolUntil.Format(time.RFC3339), s.CoolReason)
}
