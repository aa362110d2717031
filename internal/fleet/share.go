package fleet

import "context"

// share bounds the node's slots one request holds at once: half of them,
// at least one, taken per engine call (see gate). A request with many
// questions, or a question with many rounds or orders, then cannot take
// every slot while its calls run: another caller's question finds a free
// slot instead of waiting behind all of them and timing out in the queue.
// The request's own calls past its share wait for it, bounded by the
// request's deadline, not by the node's queue.
type share chan struct{}

func (s *slots) share() share { return make(share, max(1, cap(s.sem)/2)) }

// take holds one of the request's share, returning the function that
// gives it back.
func (sh share) take(ctx context.Context) (done func(), err error) {
	select {
	case sh <- struct{}{}:
		return func() { <-sh }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
