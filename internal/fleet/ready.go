package fleet

import (
	"fmt"
	"slices"
	"strings"
)

// Unready says what keeps the router from serving models: for each
// model, in the order given, that no node serving it has answered a
// health probe yet (Probe, Ping), naming the nodes that serve it, or
// that none is known to serve it; with no models, that no node at all
// has answered. Nil when every model has a node that answered: the
// readiness a load balancer asks before it sends traffic (GET /readyz).
// A node answers a probe when it lists its models (or, for one whose
// models the configuration names, when it is alive).
func (r *Router) Unready(models []string) []string {
	if len(models) == 0 {
		if slices.ContainsFunc(r.nodes, (*Node).hasAnswered) {
			return nil
		}
		return []string{fmt.Sprintf("no node has answered a health probe yet (nodes: %s)", names(r.nodes))}
	}
	var out []string
	for _, m := range models {
		serving := r.Serving(m)
		switch {
		case len(serving) == 0:
			out = append(out, fmt.Sprintf("model %s: no node is known to serve it yet (a node whose models are not configured lists them when it answers a probe)", m))
		case !slices.ContainsFunc(serving, (*Node).hasAnswered):
			out = append(out, fmt.Sprintf("model %s: no node serving it has answered a health probe yet (nodes: %s)", m, names(serving)))
		}
	}
	return out
}

// hasAnswered reports whether n has answered a health probe since the
// process started.
func (n *Node) hasAnswered() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.answered
}

// names lists nodes' names, comma-separated.
func names(nodes []*Node) string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.Name
	}
	return strings.Join(s, ", ")
}
