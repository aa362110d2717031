package engine

import (
	"cmp"
	"context"
	"fmt"

	"system1/internal/decision"
	"system1/internal/fingerprint"
)

// Identifier is an engine that can say which build it serves under a
// model name: the fields its API reports of the model (a digest, a model
// file, a parameter count, the server's own version), read by calls that
// run no model and carry no user data, each reply bounded by
// fingerprint.MaxReply. The fleet compares them with what it saw before
// (internal/fingerprint).
type Identifier interface {
	// Identity reads model's identity. Fields that change while the build
	// does not (timestamps, the context a server was started with) are
	// left out.
	Identity(ctx context.Context, model string) (fingerprint.Identity, error)
}

// CanaryUsage is what one canary reading cost: the engine calls made and
// the tokens they took, as the engine counted them or estimated (see
// Outcome).
type CanaryUsage struct {
	Calls                     int
	InputTokens, OutputTokens int
	Estimated                 bool
}

// ReadCanary asks e the canary's questions about model (fingerprint),
// each as Ask asks it, in the caller's order of options, one after
// another, and returns the reading and its cost. A question the model
// ranked none of the labels of is read as uninformative, which is a
// property of the build; any other failure fails the reading.
func ReadCanary(ctx context.Context, e Engine, model string) (fingerprint.Reading, CanaryUsage, error) {
	req := fingerprint.Request(model)
	dists := make([]decision.Distribution, len(req.Questions))
	answered := ""
	var use CanaryUsage
	for i, q := range req.Questions {
		o, err := Ask(ctx, e, model, req.State, q)
		if f := Classify(err); f != nil {
			use.Calls++ // one call answered uninformatively, or failed
			if f.Uninformative {
				continue
			}
			return fingerprint.Reading{}, use, fmt.Errorf("canary question %s: %w", q.ID, err)
		}
		use.Calls += o.Rounds
		use.InputTokens += o.InputTokens
		use.OutputTokens += o.OutputTokens
		use.Estimated = use.Estimated || o.Estimated
		dists[i], answered = o.Dist, cmp.Or(answered, o.Model)
	}
	r, err := fingerprint.NewReading(dists, answered)
	return r, use, err
}
