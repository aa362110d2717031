package fleet

import (
	"strings"
	"time"
)

// Model is one model id the fleet answers to.
type Model struct {
	ID      string
	AliasOf string    // the served model, for an alias
	Via     string    // the nodes that serve it, comma-separated
	Seen    time.Time // when this router first listed it
}

// Catalog lists every model the nodes serve and every alias whose target
// is served.
func (r *Router) Catalog() []Model {
	via := map[string][]string{}
	var ids []string
	for _, n := range r.nodes {
		for _, m := range n.Models() {
			if via[m] == nil {
				ids = append(ids, m)
			}
			via[m] = append(via[m], n.Name)
		}
	}
	var out []Model
	for _, id := range ids {
		out = append(out, Model{ID: id, Via: strings.Join(via[id], ","), Seen: r.seen(id)})
	}
	for alias, to := range r.aliases {
		if via[to] != nil && via[alias] == nil {
			out = append(out, Model{ID: alias, AliasOf: to, Via: strings.Join(via[to], ","), Seen: r.seen(alias)})
		}
	}
	return out
}

func (r *Router) seen(id string) time.Time {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.firstSeen == nil {
		r.firstSeen = map[string]time.Time{}
	}
	t, ok := r.firstSeen[id]
	if !ok {
		t = r.now()
		r.firstSeen[id] = t
	}
	return t
}
