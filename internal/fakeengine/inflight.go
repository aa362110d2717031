package fakeengine

import (
	"context"
	"sync"
)

// inflight counts the requests a fake is handling, so that a test can
// wait until it handles none, such as a hung request whose client gave up.
type inflight struct {
	mu   sync.Mutex
	n    int
	peak int           // the most handled at once
	idle chan struct{} // closed while no request is handled; nil before the first
}

// enter counts a request in, returning the function that counts it out.
func (c *inflight) enter() func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		c.idle = make(chan struct{})
	}
	c.n++
	c.peak = max(c.peak, c.n)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.n--; c.n == 0 {
			close(c.idle)
		}
	}
}

// wait returns once no request is handled, or ctx's error first.
func (c *inflight) wait(ctx context.Context) error {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
