package outcomes

import (
	"cmp"
	"fmt"
	"time"
)

// LoopOptions are what the learning loop of a server does: how often it
// refits from the decision log (0: never) and the outcomes a bucket needs
// new since its last refit (0: DefaultMinOutcomes).
type LoopOptions struct {
	RefitEvery  time.Duration
	MinOutcomes int
}

// LoopStatus says what the learning loop does and what it waits for, so
// that a page (or an operator) sees why nothing was learnt yet: the
// calibration report's loop.
type LoopStatus struct {
	Refits      bool    `json:"refits" jsonschema:"Whether the server refits calibration from the outcomes reported (calibration.refit_every)."`
	EverySec    float64 `json:"every_s,omitempty" jsonschema:"How often it refits, in seconds; absent when it does not."`
	MinOutcomes int     `json:"min_outcomes" jsonschema:"The outcomes a bucket needs new since its last refit to be refitted."`
	Outcomes    int     `json:"outcomes" jsonschema:"The outcomes recorded, over every bucket."`
	// WaitingFor is the fewest outcomes any bucket still needs before it
	// is refitted: 0 when one is due at the next refit.
	WaitingFor int    `json:"waiting_for" jsonschema:"The fewest outcomes a bucket still needs before its next refit; 0 when one is due at the next refit."`
	Status     string `json:"status" jsonschema:"What the loop is doing or waiting for, in words."`
}

// loop is the loop's status over the buckets the tracker counts; t.mu is
// held.
func (t *Tracker) loop(o LoopOptions) *LoopStatus {
	minOutcomes := cmp.Or(max(o.MinOutcomes, 0), DefaultMinOutcomes)
	st := &LoopStatus{Refits: o.RefitEvery > 0, MinOutcomes: minOutcomes, WaitingFor: minOutcomes}
	var closest *tbucket
	for _, b := range t.sorted() {
		st.Outcomes += b.refit.Outcomes
		if need := max(minOutcomes-b.refit.New(), 0); need < st.WaitingFor || closest == nil {
			st.WaitingFor, closest = need, b
		}
	}
	if !st.Refits {
		st.Status = "refits from outcomes are off (calibration.mode off, or refit_every 0s): fits change only when system1 calibrate writes them"
		return st
	}
	st.EverySec = o.RefitEvery.Seconds()
	switch {
	case closest == nil:
		st.Status = fmt.Sprintf("waiting for %d outcomes: none has been reported yet (POST /v1/feedback, system1 feedback or the system1_feedback tool); a bucket is refitted once it has %d new, checked every %s",
			minOutcomes, minOutcomes, o.RefitEvery)
	case st.WaitingFor > 0:
		st.Status = fmt.Sprintf("waiting for %d more outcomes: %s's %s answers of %s have %d new of the %d a refit needs, checked every %s",
			st.WaitingFor, closest.key.model, closest.key.kind, closest.key.bucket, closest.refit.New(), minOutcomes, o.RefitEvery)
	default:
		st.Status = fmt.Sprintf("%s's %s answers of %s have %d new outcomes: the next refit (every %s) takes them",
			closest.key.model, closest.key.kind, closest.key.bucket, closest.refit.New(), o.RefitEvery)
	}
	return st
}
