package answer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"system1/internal/engine"
	"system1/internal/fleet"
)

// Every face reads a failure's class here: the engine's refusal of the
// request is the caller's, a 429 says how long to wait, a model no node
// serves is its own class, anything else is no answer.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err   error
		class Class
		wait  time.Duration
	}{
		{fmt.Errorf("node a: %w", engine.StatusFailure(400, 0, "bad")), CallerError, 0},
		{fmt.Errorf("node a: %w", engine.StatusFailure(422, 0, "bad")), CallerError, 0},
		{fmt.Errorf("node a: %w", &engine.Failure{Kind: engine.Rejected, Err: errors.New("too few labels")}), CallerError, 0},
		{fmt.Errorf("node a: %w", engine.StatusFailure(429, 3*time.Second, "slow down")), NoAnswer, 3 * time.Second},
		{fmt.Errorf("node a: %w", engine.StatusFailure(503, 0, "down")), NoAnswer, 0},
		{fmt.Errorf("node a: %w", &engine.Failure{Kind: engine.Timeout, Err: context.DeadlineExceeded}), TimedOut, 0},
		{fmt.Errorf("node a: %w", &engine.Failure{Kind: engine.Malformed, Err: errors.New("NaN")}), Malformed, 0},
		{context.DeadlineExceeded, TimedOut, 0},
		{errors.New("every node is cooling down"), NoAnswer, 0},
		{fmt.Errorf("model %q: %w", "m", fleet.ErrUnknownModel), UnknownModel, 0},
	} {
		class, wait := Classify(c.err)
		if class != c.class || wait != c.wait {
			t.Errorf("%v: %s, %s; want %s, %s", c.err, class, wait, c.class, c.wait)
		}
	}
	if got := Cause(fmt.Errorf("node a: %w", engine.StatusFailure(422, 0, "options over budget"))); got.Error() != "options over budget" {
		t.Errorf("cause %q", got)
	}
}
