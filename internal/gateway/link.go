package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
	fleet      *fleet.Router
	fits       *FitsFile
}

// limit is how many options the link takes: the largest option cap of
// the nodes serving the model (listing the nodes' models once if none is
// known to serve it yet), and at most the link's own.
func (l *link) limit(ctx context.Context) (int, error) {
	lim, err := l.fleet.Limits(l.model)
	if errors.Is(err, fleet.ErrUnknownModel) {
		l.fleet.Refresh(ctx)
		lim, err = l.fleet.Limits(l.model)
	}
	if err != nil {
		return 0, fmt.Errorf("no configured node serves model %q", l.model)
	}
	n := lim.MaxChoiceOptions
	if l.maxOptions > 0 {
		n = min(n, l.maxOptions)
	}
	return n, nil
}

// ask answers the query through the fleet. The reading is calibrated by
// the fleet's report, the same one /v1/systemone makes, and recorded by
// rec as asked.
func (l *link) ask(ctx context.Context, q Query, rec fleet.Recorder, asked fleet.Asked) (Reading, error) {
	req := q.Request(l.model)
	res, err := l.fleet.Decide(ctx, req)
	if err != nil {
		return Reading{}, &failure{outcome: OutcomeError, err: fmt.Errorf("no configured node serves model %q", l.model)}
	}
	a := res.Questions[0]
	var tries []string
	for _, at := range a.Attempts {
		tries = append(tries, fmt.Sprintf("node %s: %s", at.Node, at.Outcome))
	}
	if a.Err != nil {
		return Reading{}, classify(ctx, a.Err, tries)
	}
	// One snapshot of the fits both tempers the answer and gates its
	// grade, so a reload between the two cannot mix revisions.
	fits := l.fits.Current()
	rep := res.Report(req, fits, l.name)
	res.Record(rec, req, rep, asked)
	detail := fmt.Sprintf("answered by node %s", a.Node)
	if len(tries) > 1 {
		detail += " after " + strings.Join(tries[:len(tries)-1], ", ")
	}
	for _, w := range rep.Warnings {
		detail += "; " + w.String()
	}
	return Reading{Dist: rep.Dists[0], Calibrated: rep.Calibrated, FitVersion: rep.FitVersion, Model: a.Model, Abstain: a.Abstain, Detail: detail,
		Steps: rep.Steps[0], Engine: rep.Engine[0], LabelMass: rep.LabelMass[0], fits: fits}, nil
}

// classify maps the fleet's class of a failure to the gateway's outcomes:
// the caller's error is not asked of another link.
func classify(ctx context.Context, err error, tries []string) *failure {
	// The last try is the error itself; the ones before say where else
	// the question went.
	msg := err.Error()
	if len(tries) > 1 {
		msg = strings.Join(tries[:len(tries)-1], ", ") + ", " + msg
	}
	out := &failure{outcome: OutcomeError, err: errors.New(msg)}
	if ctx.Err() != nil {
		out.outcome = OutcomeTimeout
		return out
	}
	switch class, _ := fleet.Classify(err); class {
	case fleet.TimedOut:
		out.outcome = OutcomeTimeout
	case fleet.Malformed:
		out.outcome = OutcomeMalformed
	case fleet.CallerError:
		out.caller = true
		out.err = fleet.Cause(err)
	}
	return out
}

// probe lists the models of the nodes that serve the link's model: no
// user data is sent. ok is whether any of them answers; down names those
// that do not, or cool down, each with why, as their state says it.
func (l *link) probe(ctx context.Context) (ok bool, detail string, down []string) {
	l.fleet.Refresh(ctx)
	pings := l.fleet.Ping(ctx, l.model)
	if len(pings) == 0 {
		var names []string
		for _, n := range l.fleet.Nodes() {
			s := n.State(time.Now())
			d := n.Name
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
	n, err := l.limit(ctx)
	if err != nil {
		info.Problem = err.Error()
		info.Capabilities.MaxOptions = 0
	} else {
		info.Capabilities.MaxOptions = n
	}
	return info
}
