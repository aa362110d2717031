package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"system1/internal/jobs"
	"system1/internal/outcomes"
)

// logFeedback records a run's outcomes through outcomes.Feedback, the
// path POST /v1/feedback, system1_feedback and system1 feedback take.
type logFeedback struct{ f *outcomes.Feedback }

// RecordOutcomes records outs in batches of the most one feedback call
// takes.
func (l logFeedback) RecordOutcomes(ctx context.Context, outs []jobs.Outcome) (int, error) {
	n := 0
	for batch := range slices.Chunk(outs, outcomes.MaxFeedbackOutcomes) {
		items := make([]outcomes.FeedbackItem, len(batch))
		for i, o := range batch {
			key, _ := json.Marshal(o.Option) // a Go string always marshals
			items[i] = outcomes.FeedbackItem{RequestID: o.RequestID, Question: o.Question, Outcome: key}
		}
		if res := l.f.Record(ctx, items); res.Error != nil {
			return n, errors.New(res.Error.Message)
		}
		n += len(batch)
	}
	return n, nil
}
