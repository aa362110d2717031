package fleet

import (
	"context"
	"math"

	"system1/internal/decision"
	"system1/internal/decisionsapi"
	"system1/internal/engine"
)

// DecisionsBackend is a backend over an OpenAI-shaped Decisions endpoint
// (OpenAI, vLLM >= 0.33, Fireworks, another system1's /v1/decisions): a
// request's questions go to it in one call, translated by package
// decisionsapi (a noul as a predicate, a choice's options as choices
// with their descriptions, a score's levels in order), and its answers
// come back into the domain. A question the endpoint refuses stays a
// refusal: it is answered with the endpoint's words and no reading, and
// never asked of another node.
func DecisionsBackend(c *decisionsapi.Client) Backend { return &decisionsBackend{c: c} }

var _ Backend = (*decisionsBackend)(nil)

type decisionsBackend struct{ c *decisionsapi.Client }

// refusedByEndpoint is what a question the endpoint refused is declined
// with: the wire gives no reason.
const refusedByEndpoint = "the Decisions endpoint refused to answer it"

func (b *decisionsBackend) Models(ctx context.Context) ([]string, error) {
	models, err := b.c.Models(ctx)
	if f := failure(err); f != nil {
		return nil, f
	}
	return models, nil
}

func (b *decisionsBackend) ask(c *caller, req decision.Request) []answer {
	start := c.now()
	var reply *decisionsapi.Reply
	err := c.call(func(ctx context.Context) (err error) {
		reply, err = b.c.Ask(ctx, req)
		return err
	})
	out := make([]answer, len(req.Questions))
	for j := range out {
		var o engine.Outcome
		declined := ""
		if err == nil {
			// The endpoint's numbers are normalised over the options:
			// how much the model put on them at all is not known here.
			o = engine.Outcome{Dist: reply.Dists[j], Mass: math.NaN(), Rounds: 1, Model: reply.Model}
			if j == 0 { // the endpoint counts the request as a whole
				o.InputTokens, o.OutputTokens = reply.Usage.InputTokens, reply.Usage.OutputTokens
			}
			if reply.Refused[j] {
				declined = refusedByEndpoint
			}
		}
		out[j] = c.result(start, o, declined, err)
		if j == 0 && err == nil {
			out[j].requests = 1
		}
	}
	return out
}

// A Decisions endpoint takes a request's questions in one call, which
// the request pays (see requestCost): a question costs none of its own.
func (b *decisionsBackend) calls(string, decision.Question) int { return 0 }

func (b *decisionsBackend) spends() string { return "forwards a request in one call" }
