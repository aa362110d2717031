package answer

import (
	"system1/internal/decision"
	"system1/internal/fleet"
)

// Meter is told what each question the fleet answered cost, by the node
// that answered it and the model asked (resolved, as the fleet's metrics
// name it): system1_cost_usd_total; and of each question the service
// refused, by that model and the refusal's Reason:
// system1_refusals_total. It is told of every answer the fleet gave,
// those of a request that failed on another question and a shadow's
// included, and never of a cache hit, which asked nothing. It must not
// block.
type Meter interface {
	Spent(node, model string, usd float64)
	Refused(model, reason string)
}

// questionCost is what the fleet's answer got cost, priced by the node
// that answered it: the tokens that node reported, and the forwarded
// request it carries on a hosted endpoint. nil when the node has no
// price. An attempt that failed on another node first (an error, a
// timeout, a malformed reply) is not counted: its engine reported no
// usage, and a hosted endpoint bills no failed request.
func questionCost(got fleet.Answered) *decision.USD {
	if got.Price == nil {
		return nil
	}
	c, ok := got.Price.Cost(got.InputTokens, got.OutputTokens, got.Requests)
	if !ok { // more than a USD holds: not known, rather than wrapped
		return nil
	}
	return &c
}

// AddCost is a+b, unknown (nil) when either is, or when the sum is more
// than a USD holds.
func AddCost(a, b *decision.USD) *decision.USD {
	if a == nil || b == nil {
		return nil
	}
	c, ok := decision.Add(*a, *b)
	if !ok {
		return nil
	}
	return &c
}

// spend tells the meter what every question the fleet answered in res
// cost on its node, asked of model (resolved), whether or not the
// request as a whole is answered.
func (s *Service) spend(model string, res *fleet.Result) {
	if s.opt.Meter == nil || res == nil {
		return
	}
	for _, got := range res.Questions {
		if got.Err != nil {
			continue
		}
		if c := questionCost(got); c != nil {
			s.opt.Meter.Spent(got.Node, model, c.Dollars())
		}
	}
}
