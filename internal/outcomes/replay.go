package outcomes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"system1/internal/answer"
	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// FaceReplay names a replay's requests to the answer path; a replay
// records nothing.
const FaceReplay = "replay"

// Replay asks candidate, through svc, the questions logged from since to
// until whose states and questions were kept, request by request, the
// latest first, at most limit questions, and reports its answers against
// the ones served. A question the candidate refused with no reading (one
// its model ranked no label of) is left out, as a shadow records none;
// a candidate that refused them all is an error saying so.
func Replay(ctx context.Context, svc *answer.Service, l *decisionlog.Log, candidate string, since, until time.Time, limit int) (ShadowReport, error) {
	rep := ShadowReport{Since: since.UTC(), Until: until.UTC(), Source: FaceReplay, Signatures: []ShadowSignature{}}
	es, err := l.Window(ctx, since, until.Add(time.Nanosecond), "")
	if err != nil {
		return rep, err
	}
	qs, err := l.Questions(ctx, since, until.Add(time.Nanosecond))
	if err != nil {
		return rep, err
	}
	// The served answers per request, in the order written; a request's
	// questions are asked together, over its one state, as they were.
	type logged struct {
		entries []decisionlog.Entry
		req     decision.Request
	}
	byReq := map[string]*logged{}
	var order []string
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
			g = &logged{req: decision.Request{Model: candidate, State: e.State}}
			byReq[e.RequestID] = g
			order = append(order, e.RequestID)
		}
		g.entries = append(g.entries, e)
		g.req.Questions = append(g.req.Questions, q)
	}
	var pairs []ShadowPair
	asked, failed, refused := 0, 0, 0
	var firstErr error
	var firstRefusal *answer.Refusal
	for i := len(order) - 1; i >= 0 && asked < limit; i-- {
		g := byReq[order[i]]
		if asked+len(g.req.Questions) > limit {
			continue
		}
		asked += len(g.req.Questions)
		a, err := svc.Answer(ctx, answer.Request{Request: g.req, Face: FaceReplay, RequestID: order[i]})
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
	if asked == 0 {
		return rep, errors.New("the decision log holds no question to replay in the window: replay needs decision_log.keep_states: true, which keeps each state and question")
	}
	switch {
	case len(pairs) == 0 && failed == 0:
		return rep, fmt.Errorf("the candidate refused all %d questions replayed, with no reading to compare (the first: %s)", refused, firstRefusal)
	case len(pairs) == 0:
		return rep, fmt.Errorf("the candidate answered none of the %d requests replayed: %w", failed, firstErr)
	}
	rep.Signatures = ShadowReportOf(pairs)
	return rep, nil
}
