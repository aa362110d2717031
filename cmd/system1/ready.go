package main

import (
	"log/slog"
	"slices"
	"sync/atomic"

	"system1/internal/config"
	"system1/internal/fleet"
	"system1/internal/httpapi"
)

// readiness is what serve's GET /readyz reports (httpapi.Options.Ready).
// The configuration is loaded and checked before the listener opens, so
// a server that answers has it; what remains is that the decision log is
// open (or off by the configuration), that every model the configuration
// serves callers has a node that answered a health probe (a shadow's
// candidate is not one), and that the server is not draining. Once every model has had a node answer, a node going down
// later does not make the server unready: /health says so, and since the
// replicas share their nodes, taking them all out of a load balancer
// would only turn 503s that name the node into refused connections.
type readiness struct {
	router *fleet.Router
	models []string
	log    *slog.Logger
	// logProblem, set before the server starts, says why the configured
	// decision log is not open.
	logProblem string
	// logGone reports the log's file removed or replaced while serving.
	logGone    func() bool
	nodesReady atomic.Bool
	draining   atomic.Bool
}

// configuredModels are the models the configuration names callers
// served, each once: the nodes' models, then the chain's, a cascade's by
// its stages. A model named only as a shadow's candidate (itself or
// through an alias) is left out: it is asked off the request path, so its
// node being down keeps no caller from an answer and must not take every
// replica out of its load balancer. cfg is normalized (the old
// providers: form is the chain by then).
func configuredModels(cfg *config.Config) []string {
	served := map[string]bool{}
	for _, r := range cfg.Shadow {
		served[r.Model] = true
	}
	for _, l := range cfg.Gateway.Chain {
		served[l.Model] = true
	}
	candidate := map[string]bool{}
	for _, r := range cfg.Shadow {
		for _, m := range []string{r.Candidate, cfg.Aliases[r.Candidate]} {
			if !served[m] {
				candidate[m] = true
			}
		}
	}
	var out []string
	add := func(m string) {
		if m != "" && !candidate[m] && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	for _, n := range cfg.Nodes {
		for _, m := range n.Models {
			add(m)
		}
	}
	for _, l := range cfg.Gateway.Chain {
		i := slices.IndexFunc(cfg.Cascades, func(c config.Cascade) bool { return c.Model == l.Model })
		if i < 0 {
			add(l.Model)
			continue
		}
		for _, st := range cfg.Cascades[i].Stages {
			add(st)
		}
	}
	return out
}

// check lists the conditions not met, none when ready; draining alone
// while draining.
func (rd *readiness) check() []httpapi.NotReady {
	if rd.draining.Load() {
		return []httpapi.NotReady{{Check: httpapi.CheckDraining, Detail: "shutting down: finishing the requests in flight"}}
	}
	var out []httpapi.NotReady
	if rd.logProblem != "" {
		out = append(out, httpapi.NotReady{Check: httpapi.CheckDecisionLog, Detail: rd.logProblem})
	}
	if rd.logGone != nil && rd.logGone() {
		out = append(out, httpapi.NotReady{Check: httpapi.CheckDecisionLog, Detail: "the decision log's file was removed or replaced while serving: answers are recorded where nothing reads them, until serve restarts"})
	}
	return append(out, rd.nodes()...)
}

// nodes lists the models without a node that answered a probe, until
// every one has had one; it logs the moment they all have.
func (rd *readiness) nodes() []httpapi.NotReady {
	if rd.nodesReady.Load() {
		return nil
	}
	missing := rd.router.Unready(rd.models)
	if len(missing) == 0 {
		if rd.nodesReady.CompareAndSwap(false, true) {
			rd.log.Info("ready: every configured model has a node that answered a health probe", "request_id", "-", "models", len(rd.models))
		}
		return nil
	}
	out := make([]httpapi.NotReady, len(missing))
	for i, m := range missing {
		out[i] = httpapi.NotReady{Check: httpapi.CheckNodes, Detail: m}
	}
	return out
}

// drain turns /readyz to 503: the first step of a shutdown, before the
// listeners close.
func (rd *readiness) drain() { rd.draining.Store(true) }
