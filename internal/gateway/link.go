package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/fleet"
)

// link is one link of the chain: a model the fleet serves, asked of every
// node that serves it or of the nodes the configuration names.
type link struct {
	name, model string
	// kind and url describe the link for capabilities: "systemone" and the
	// endpoint when its nodes are one System One endpoint, else "engine".
	kind, url  string
	timeout    time.Duration
	maxOptions int // from the configuration; 0 means the nodes' cap
	// answer is the answer path over the link's nodes: those nodes
	// names, else every node.
	answer *answer.Service
	nodes  []string
}

// limit is how many options the link takes: the largest option cap of
// the nodes serving the model (answer.Service.Admit), and at most the
// link's own.
func (l *link) limit(ctx context.Context) (int, error) {
	lim, err := l.answer.Admit(ctx, l.model)
	if err != nil {
		return 0, fmt.Errorf("no configured node serves model %q", l.model)
	}
	n := lim.MaxChoiceOptions
	if l.maxOptions > 0 {
		n = min(n, l.maxOptions)
	}
	return n, nil
}

// ask answers the query through the answer path, the one /v1/systemone
// takes, which calibrates, checks and records it as who asked it.
func (l *link) ask(ctx context.Context, q query, who answer.Request) (reading, error) {
	who.Request, who.Provider = q.request(l.model), l.name
	a, err := l.answer.Answer(ctx, who)
	if f := (*answer.Failure)(nil); errors.As(err, &f) {
		return reading{}, l.failed(ctx, f)
	} else if err != nil {
		return reading{}, &failure{outcome: OutcomeError, err: err}
	}
	aq := a.Questions[0]
	detail := fmt.Sprintf("answered by node %s", aq.Node)
	if a.Cache == answer.CacheHit {
		detail = fmt.Sprintf("answered from the cache: node %s's answer to the same request", aq.Node)
	}
	if tries := tried(aq.Attempts); len(tries) > 1 {
		detail += " after " + strings.Join(tries[:len(tries)-1], ", ")
	}
	for _, w := range a.Warnings {
		detail += "; " + w.String()
	}
	return reading{Question: aq, answer: a, Detail: detail}, nil
}

// tried names each attempt: "node n1: timeout".
func tried(attempts []fleet.Attempt) []string {
	out := make([]string, len(attempts))
	for i, at := range attempts {
		out[i] = fmt.Sprintf("node %s: %s", at.Node, at.Outcome)
	}
	return out
}

// failed maps the answer path's class of a failure to the gateway's
// outcomes: the caller's error is not asked of another link.
func (l *link) failed(ctx context.Context, f *answer.Failure) *failure {
	if f.Class == answer.UnknownModel || len(f.Problems) == 0 {
		return &failure{outcome: OutcomeError, err: fmt.Errorf("no configured node serves model %q", l.model)}
	}
	p := f.Problems[0]
	// The last try is the failure itself; the ones before say where else
	// the question went.
	msg := p.Message
	if tries := tried(p.Attempts); len(tries) > 1 {
		msg = strings.Join(tries[:len(tries)-1], ", ") + ", " + msg
	}
	out := &failure{outcome: OutcomeError, err: errors.New(msg), raw: p.Err}
	if ctx.Err() != nil {
		out.outcome = OutcomeTimeout
		return out
	}
	switch p.Class {
	case answer.TimedOut:
		out.outcome = OutcomeTimeout
	case answer.Malformed:
		out.outcome = OutcomeMalformed
	case answer.CallerError:
		out.caller = true
		out.err = errors.New(p.Cause)
	}
	return out
}

// probe lists the models of the nodes that serve the link's model: no
// user data is sent. ok is whether any of them answers; down names those
// that do not, or cool down, each with why, as their state says it.
func (l *link) probe(ctx context.Context) (ok bool, detail string, down []string) {
	pings := l.answer.Ping(ctx, l.model)
	if len(pings) == 0 {
		var names []string
		for _, s := range l.answer.States() {
			d := s.Name
			if s.Error != "" {
				d += " (" + s.Error + ")"
			}
			names = append(names, d)
		}
		if len(names) == 0 {
			return false, fmt.Sprintf("no nodes are configured, so nothing serves model %q", l.model), nil
		}
		return false, fmt.Sprintf("no configured node serves model %q; nodes: %s", l.model, strings.Join(names, ", ")), nil
	}
	results := make([]string, len(pings))
	for i, p := range pings {
		switch {
		case p.Err != nil:
			results[i] = fmt.Sprintf("node %s: %v", p.Node, p.Err)
			down = append(down, fmt.Sprintf("node %s (%v)", p.Node, p.Err))
		case !p.Healthy:
			results[i] = fmt.Sprintf("node %s: answers, but is cooling down after failures", p.Node)
			down = append(down, fmt.Sprintf("node %s (cooling down: %s)", p.Node, p.CoolReason))
			ok = true
		default:
			results[i] = fmt.Sprintf("node %s: up (%d models listed)", p.Node, p.Models)
			ok = true
		}
	}
	return ok, strings.Join(results, "; "), down
}

// info describes the link for capabilities.
func (l *link) info(ctx context.Context) ProviderInfo {
	k := Kinds[0]
	if l.kind == "systemone" {
		k = Kinds[1]
	}
	info := ProviderInfo{Name: l.name, Kind: l.kind, Model: l.model, URL: l.url, TimeoutMS: l.timeout.Milliseconds(), Capabilities: k.Capabilities}
	info.Capabilities.Note = ""
	var err error
	if info.Capabilities.MaxOptions, err = l.limit(ctx); err != nil {
		info.Problem = err.Error()
	}
	return info
}
