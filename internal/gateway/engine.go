package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"system1/internal/engine"
	"system1/internal/fleet"
)

// engineProvider asks system1's own core: the fleet's router over the
// configured nodes, for one model.
type engineProvider struct {
	name, model string
	timeout     time.Duration
	maxOptions  int // from the configuration; 0 means the router's cap
	router      *fleet.Router
}

func (p *engineProvider) Name() string           { return p.name }
func (p *engineProvider) Kind() string           { return "engine" }
func (p *engineProvider) Model() string          { return p.model }
func (p *engineProvider) Timeout() time.Duration { return p.timeout }

// MaxOptions is the label cap of the nodes serving the model, listing the
// nodes' models once if none is known to serve it yet.
func (p *engineProvider) MaxOptions(ctx context.Context) (int, error) {
	lim, err := p.router.Limits(p.model)
	if errors.Is(err, fleet.ErrUnknownModel) {
		p.router.Refresh(ctx)
		lim, err = p.router.Limits(p.model)
	}
	if err != nil {
		return 0, fmt.Errorf("no configured node serves model %q", p.model)
	}
	n := lim.MaxChoiceOptions
	if p.maxOptions > 0 {
		n = min(n, p.maxOptions)
	}
	return n, nil
}

func (p *engineProvider) Ask(ctx context.Context, q Query) (Reading, error) {
	req := q.Request(p.model)
	res, err := p.router.Decide(ctx, req)
	if err != nil {
		return Reading{}, &Failure{Outcome: OutcomeError, Err: fmt.Errorf("no configured node serves model %q", p.model)}
	}
	a := res.Questions[0]
	var tries []string
	for _, at := range a.Attempts {
		tries = append(tries, fmt.Sprintf("node %s: %s", at.Node, at.Outcome))
	}
	if a.Err != nil {
		return Reading{}, engineFailure(ctx, a.Err, tries)
	}
	detail := fmt.Sprintf("answered by node %s", a.Node)
	if len(tries) > 1 {
		detail += " after " + strings.Join(tries[:len(tries)-1], ", ")
	}
	if len(a.Missing) > 0 {
		detail += fmt.Sprintf("; options %q were not among the engine's top log-probabilities and got 0", a.Missing)
	}
	return Reading{Dist: a.Dist, Model: a.Model, Detail: detail}, nil
}

// engineFailure maps the router's failure to the gateway's outcomes: a
// request the engine refused with 400, 413 or 422 is the caller's.
func engineFailure(ctx context.Context, err error, tries []string) *Failure {
	msg := err.Error()
	if len(tries) > 0 {
		msg = strings.Join(tries, ", ") + ": " + msg
	}
	out := &Failure{Outcome: OutcomeError, Err: errors.New(msg)}
	var f *engine.Failure
	switch {
	case ctx.Err() != nil:
		out.Outcome = OutcomeTimeout
	case errors.As(err, &f) && f.Kind == engine.Timeout:
		out.Outcome = OutcomeTimeout
	case errors.As(err, &f) && f.Kind == engine.Malformed:
		out.Outcome = OutcomeMalformed
	case errors.As(err, &f) && f.Kind == engine.Rejected && (f.Status == http.StatusBadRequest || f.Status == http.StatusRequestEntityTooLarge || f.Status == http.StatusUnprocessableEntity):
		out.Caller = true
		out.Err = f.Err
	}
	return out
}

// Probe lists the models of the nodes that serve the model (GET /v1/models
// or the dialect's equivalent): no user data is sent.
func (p *engineProvider) Probe(ctx context.Context) (bool, string) {
	p.router.Refresh(ctx)
	nodes := p.router.Serving(p.model)
	if len(nodes) == 0 {
		var names []string
		for _, n := range p.router.Nodes() {
			s := n.State(time.Now())
			d := n.Name
			if s.Error != "" {
				d += " (" + s.Error + ")"
			}
			names = append(names, d)
		}
		if len(names) == 0 {
			return false, fmt.Sprintf("no nodes are configured, so nothing serves model %q", p.model)
		}
		return false, fmt.Sprintf("no configured node serves model %q; nodes: %s", p.model, strings.Join(names, ", "))
	}
	results := make([]string, len(nodes))
	up := make([]bool, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			models, err := n.Engine.Models(ctx)
			switch {
			case err != nil:
				results[i] = fmt.Sprintf("node %s: %v", n.Name, err)
			case !n.State(time.Now()).Healthy:
				results[i] = fmt.Sprintf("node %s: answers, but is cooling down after failures", n.Name)
				up[i] = true
			default:
				results[i] = fmt.Sprintf("node %s: up (%d models listed)", n.Name, len(models))
				up[i] = true
			}
		})
	}
	wg.Wait()
	ok := false
	for _, u := range up {
		ok = ok || u
	}
	return ok, strings.Join(results, "; ")
}

func (p *engineProvider) Info(ctx context.Context) ProviderInfo {
	info := ProviderInfo{Name: p.name, Kind: "engine", Model: p.model, TimeoutMS: p.timeout.Milliseconds(), Capabilities: Kinds[0].Capabilities}
	info.Capabilities.Note = ""
	n, err := p.MaxOptions(ctx)
	if err != nil {
		info.Problem = err.Error()
		info.Capabilities.MaxOptions = 0
	} else {
		info.Capabilities.MaxOptions = n
	}
	return info
}
