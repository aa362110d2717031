package fleet

import (
	"context"

	"system1/internal/decision"
	"system1/internal/decisionsapi"
)

// DecisionsBackend is a backend over an OpenAI-shaped Decisions endpoint
// (OpenAI, vLLM >= 0.33, Fireworks, another system1's /v1/decisions): a
// request's questions go to it in one call, translated by package
// decisionsapi (a noul as a predicate, a choice's options as choices
// with their descriptions, a score's levels in order), and its answers
// come back into the domain. A question the endpoint refuses stays a
// refusal: it is answered with the endpoint's words and no reading, and
// never asked of another node.
func DecisionsBackend(c *decisionsapi.Client) Backend {
	return &upstreamBackend{c, func(ctx context.Context, req decision.Request) (*forwarded, error) {
		reply, err := c.Ask(ctx, req)
		if err != nil {
			return nil, err
		}
		declined := make([]string, len(reply.Refused))
		for j, refused := range reply.Refused {
			if refused {
				declined[j] = refusedByEndpoint
			}
		}
		return &forwarded{dists: reply.Dists, declined: declined, model: reply.Model,
			input: reply.Usage.InputTokens, output: reply.Usage.OutputTokens}, nil
	}}
}

// refusedByEndpoint is what a question the endpoint refused is declined
// with: the wire gives no reason.
const refusedByEndpoint = "the Decisions endpoint refused to answer it"
