package fleet

import (
	"system1/internal/decision"
	"system1/internal/engine"
)

// Debias is the router's order debiasing, which a request may override
// (decision.Request.Debias).
type Debias struct {
	// Permute asks each question over cyclic shifts of its options and
	// averages the readings (engine.AskOrders).
	Permute bool
	// Orders is the most shifts asked of one question; 0 is
	// decision.DefaultDebiasOrders.
	Orders int
}

// orders is how many orders of q's options a request asks: 1 without
// permutation, else every shift up to the configured number.
func (d Debias) orders(req decision.Request, q decision.Question) int {
	permute := d.Permute
	switch req.Debias {
	case decision.DebiasPermute:
		permute = true
	case decision.DebiasOff:
		permute = false
	}
	if !permute {
		return 1
	}
	want := d.Orders
	if want <= 0 {
		want = decision.DefaultDebiasOrders
	}
	return engine.OrderCalls(len(q.Options), want)
}
