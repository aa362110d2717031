package answer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"system1/internal/decision"
	"system1/internal/engine"
	"system1/internal/fleet"
)

// Gate is what a question's answer must clear for the service to stand
// behind it. A question that does not is still answered, with a Refusal
// saying why; each face renders that its own way (a refusal answer on
// the Decisions wire, an error naming the question on the System One
// wire, an abstention on decide).
type Gate struct {
	// MinLabelMass refuses a question whose engine put less than this
	// probability on the option labels at all (no option seemed to fit),
	// where the engine can tell; 0 refuses none.
	MinLabelMass float64
	// None says that the last option of every choice question is the
	// implicit decision.NoneOption, which the face added: a question where
	// it is at least as likely as every other option is refused.
	None bool
}

// Reason is why a question was refused.
type Reason string

// The reasons for a refusal, in the order they are checked.
const (
	// RefusedUpstream: the node itself declined (a Decisions endpoint's
	// refusal, a System One endpoint's abstention mark).
	RefusedUpstream Reason = "upstream"
	// RefusedNone: the implicit option "none of these options fits" won.
	RefusedNone Reason = "none_option"
	// RefusedLabelMass: the engine put less than the gate's
	// MinLabelMass on the labels.
	RefusedLabelMass Reason = "label_mass"
	// RefusedUnranked: every node asked gave a reading in which the model
	// ranked none of the labels where the engine reports (or none of the
	// anchor's), so there is no number to give (engine.Failure's
	// Uninformative). Asking again reads the same, so it is a refusal,
	// not a failure to retry.
	RefusedUnranked Reason = "unranked"
)

// Refusal says why the service will not stand behind a question's
// answer.
type Refusal struct {
	Reason Reason
	// Detail is the node's own words, for RefusedUpstream; the reading's
	// failure, for RefusedUnranked.
	Detail string
	// None is the implicit option's probability, for RefusedNone.
	None float64
	// LabelMass and MinLabelMass are the mass read and the gate's, for
	// RefusedLabelMass.
	LabelMass, MinLabelMass float64
}

// String is the refusal as a caller reads it.
func (r *Refusal) String() string {
	switch r.Reason {
	case RefusedUpstream:
		return "the node declined to answer it: " + r.Detail
	case RefusedNone:
		return fmt.Sprintf("no option seemed to fit: the implicit option %q won at probability %.2f", decision.NoneOption, r.None)
	case RefusedLabelMass:
		return fmt.Sprintf("no option seemed to fit: the model put only %s of its probability on the options at all, under the requested minimum label mass %v", decision.FormatLabelMass(r.LabelMass), r.MinLabelMass)
	case RefusedUnranked:
		return "the model gave no reading of it: " + r.Detail
	}
	return string(r.Reason)
}

// Short is the refusal in a few words, for a header that lists many:
// "label mass 0.31 < 0.5", "none of these won at 0.62", "the node
// declined: ...".
func (r *Refusal) Short() string {
	switch r.Reason {
	case RefusedUpstream:
		return "the node declined: " + r.Detail
	case RefusedNone:
		return fmt.Sprintf("none of these won at %.2f", r.None)
	case RefusedLabelMass:
		return fmt.Sprintf("label mass %s < %v", decision.FormatLabelMass(r.LabelMass), r.MinLabelMass)
	case RefusedUnranked:
		return "no label ranked"
	}
	return string(r.Reason)
}

// Refusals are the problems of a request whose questions qs were
// answered by a, one for each refused question, as the wires without a
// refusal answer (/v1/systemone, its batches, system1 run) give them in
// a 422.
func (a *Answer) Refusals(qs []decision.Question) []decision.Problem {
	var ps []decision.Problem
	for i, q := range qs {
		if rf := a.Questions[i].Refusal; rf != nil {
			ps = append(ps, decision.Problem{Path: []string{"questions", q.ID}, Msg: "system1 will not stand behind this answer: " + rf.String(), Type: "refused"})
		}
	}
	return ps
}

// countRefusals tells the meter of each question of a, asked of model
// (resolved), that was refused.
func (s *Service) countRefusals(model string, a *Answer) {
	if s.opt.Meter == nil {
		return
	}
	for _, q := range a.Questions {
		if q.Refusal != nil {
			s.opt.Meter.Refused(model, string(q.Refusal.Reason))
		}
	}
}

// Refused reports whether any question of a was refused.
func (a *Answer) Refused() bool {
	return slices.ContainsFunc(a.Questions, func(q Question) bool { return q.Refusal != nil })
}

// declined is each question's refusal that the nodes gave (nil for
// none): a node's own abstention, or a reading in which the model ranked
// no label, when that is what the last node asked gave. The latter is
// turned from the question's failure into a refusal by the node that
// read it, of model (the one asked), unless the caller gave up meanwhile.
func (s *Service) declined(ctx context.Context, res *fleet.Result, model string) []*Refusal {
	out := make([]*Refusal, len(res.Questions))
	for i := range res.Questions {
		q := &res.Questions[i]
		switch {
		case q.Abstain != "":
			out[i] = &Refusal{Reason: RefusedUpstream, Detail: q.Abstain}
		case q.Err != nil && ctx.Err() == nil && uninformative(q.Err) && len(q.Attempts) > 0:
			f, _ := errors.AsType[*engine.Failure](q.Err)
			q.Err, q.Node, q.Model = nil, q.Attempts[len(q.Attempts)-1].Node, model
			out[i] = &Refusal{Reason: RefusedUnranked, Detail: s.text("node " + q.Node + ": " + f.Err.Error())}
		}
	}
	return out
}

// uninformative reports whether err is an engine failure that read no
// label (engine.Failure's Uninformative), without the allocation
// errors.As makes of its target for every answered question.
func uninformative(err error) bool {
	f, ok := errors.AsType[*engine.Failure](err)
	return ok && f.Uninformative
}

// refuse gives each question of a that the gate, or the node, will not
// stand behind its Refusal: first the nodes' own (declined), then the
// implicit none option winning, then too little label mass (only where
// the engine can tell). It is the one rule every face's refusals and
// abstentions come from.
func refuse(req Request, declined []*Refusal, a *Answer) {
	for i, q := range req.Questions {
		got := &a.Questions[i]
		switch d := got.Dist; {
		case declined[i] != nil:
			got.Refusal = declined[i]
		case req.Gate.None && q.Kind == decision.Choice && len(d) > 1 && len(d) == len(q.Options) && q.Options[len(d)-1].Key == decision.NoneOption &&
			d[len(d)-1] >= d[:len(d)-1][d[:len(d)-1].Argmax()]:
			got.Refusal = &Refusal{Reason: RefusedNone, None: d[len(d)-1]}
		case !math.IsNaN(got.LabelMass) && got.LabelMass < req.Gate.MinLabelMass:
			got.Refusal = &Refusal{Reason: RefusedLabelMass, LabelMass: got.LabelMass, MinLabelMass: req.Gate.MinLabelMass}
		}
	}
}
