package outcomes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"system1/internal/answer"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// FaceReplay names a replay's requests to the answer path; a replay
// records nothing.
const FaceReplay = "replay"

// ErrNothingToReplay means the window holds no request of another model
// than the candidate whose state and questions the log kept.
var ErrNothingToReplay = errors.New("the decision log holds no question to replay in the window: replay needs decision_log.keep_states: true, which keeps each state and question")

// Replay asks candidate, through svc, the questions logged from since to
// until whose states and questions were kept, request by request, the
// latest first, at most limit questions, and reports its answers against
// the ones served. A question the candidate refused with no reading (one
// its model ranked no label of) is left out, as a shadow records none;
// a candidate that refused them all is an error saying so.
func Replay(ctx context.Context, svc *answer.Service, l *decisionlog.Log, candidate string, since, until time.Time, limit int) (ShadowReport, error) {
	rep := ShadowReport{Since: since.UTC(), Until: until.UTC(), Source: FaceReplay, Signatures: []ShadowSignature{}}
	var pairs []ShadowPair
	asked, failed, refused := 0, 0, 0
	fewest := 0 // the fewest questions of a request left out for the limit
	var firstErr error
	var firstRefusal *answer.Refusal
	// The log is read a page of requests at a time, the latest first, so
	// that a replay holds what it asks, not the whole window.
	for before := int64(0); asked < limit; {
		es, qs, next, err := l.Replayable(ctx, since, until.Add(time.Nanosecond), candidate, before, limit)
		if err != nil {
			return rep, err
		}
		for _, g := range replayGroups(es, qs, candidate) {
			if asked+len(g.req.Questions) > limit {
				if fewest == 0 || len(g.req.Questions) < fewest {
					fewest = len(g.req.Questions)
				}
				continue
			}
			asked += len(g.req.Questions)
			a, err := svc.Answer(ctx, answer.Request{Request: g.req, Face: FaceReplay, RequestID: g.entries[0].RequestID})
			if err != nil {
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
				failed++
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			for j, e := range g.entries {
				q := a.Questions[j]
				if q.Dist == nil { // refused with no reading to compare, as a shadow records none
					refused++
					firstRefusal = cmp.Or(firstRefusal, q.Refusal)
					continue
				}
				pairs = append(pairs, ShadowPair{Served: e, Candidate: candidate, Dist: q.Dist})
			}
		}
		if next == 0 {
			break
		}
		before = next
	}
	if asked == 0 && fewest > 0 {
		return rep, fmt.Errorf("every request in the window asks more questions than --limit %d allows (the fewest asks %d); a request is replayed whole: raise --limit to at least %d", limit, fewest, fewest)
	}
	if asked == 0 {
		return rep, ErrNothingToReplay
	}
	switch {
	case len(pairs) == 0 && failed == 0:
		return rep, fmt.Errorf("the candidate refused all %d questions replayed, with no reading to compare (the first: %s)", refused, firstRefusal)
	case len(pairs) == 0:
		return rep, fmt.Errorf("the candidate answered none of the %d requests replayed: %w", failed, firstErr)
	}
	rep.Signatures, rep.Failed, rep.Refused = ShadowReportOf(pairs), failed, refused
	return rep, nil
}

// replayGroup is a logged request as a replay asks it again: its served
// records and their questions, over its one state, as they were asked.
type replayGroup struct {
	entries []decisionlog.Entry
	req     decision.Request
}

// replayGroups groups es, in the order written, by request, the latest
// request first, leaving out shadows, records of the candidate itself and
// those without a kept state or question.
func replayGroups(es []decisionlog.Entry, qs map[decisionlog.QuestionKey]json.RawMessage, candidate string) []*replayGroup {
	byReq := map[string]*replayGroup{}
	var order []*replayGroup
	for _, e := range es {
		if e.Face == decisionlog.FaceShadow || e.State == nil || e.Model == candidate {
			continue
		}
		raw, ok := qs[decisionlog.QuestionKey{RequestID: e.RequestID, QuestionID: e.QuestionID}]
		if !ok {
			continue
		}
		var q decision.Question
		if json.Unmarshal(raw, &q) != nil {
			continue
		}
		g := byReq[e.RequestID]
		if g == nil {
			g = &replayGroup{req: decision.Request{Model: candidate, State: e.State}}
			byReq[e.RequestID] = g
			order = append(order, g)
		}
		g.entries = append(g.entries, e)
		g.req.Questions = append(g.req.Questions, q)
	}
	slices.Reverse(order)
	return order
}
