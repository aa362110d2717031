package fleet

import (
	"math"
	"time"

	"system1/internal/decision"
	"system1/internal/decisionlog"
)

// Recorder takes the record of every answered question: a
// *decisionlog.Log (nil is off). It must not block.
type Recorder interface {
	Record(decisionlog.Record)
}

// Asked says who asked a request, for its records.
type Asked struct {
	// Face is decisionlog.FaceSystemOne, FaceDecide or FaceMCP.
	Face string
	// RequestID is the id the caller can report outcomes under.
	RequestID string
	// Start is when the face received the request.
	Start time.Time
}

// Record gives rec one record per answered question of req, from the
// report made of res: the engine's distribution, the steps applied and
// the final one. Every face calls it after Report, so that what is
// recorded is the same whatever the face. A nil rec records nothing.
func (res *Result) Record(rec Recorder, req decision.Request, rep Report, at Asked) {
	if rec == nil {
		return
	}
	now := time.Now()
	for i, q := range req.Questions {
		a := res.Questions[i]
		if a.Err != nil || i >= len(rep.Dists) {
			continue
		}
		keys := make([]string, len(q.Options))
		for j, o := range q.Options {
			keys[j] = o.Key
		}
		r := decisionlog.Record{
			RequestID:  at.RequestID,
			QuestionID: q.ID,
			Time:       now,
			Face:       at.Face,
			Model:      a.Model,
			Node:       a.Node,
			Kind:       q.Kind,
			Options:    keys,
			EngineDist: a.Dist,
			Final:      rep.Dists[i],
			State:      req.State,
		}
		if !at.Start.IsZero() {
			r.Latency = now.Sub(at.Start)
		}
		if i < len(rep.Engine) {
			r.EngineDist = rep.Engine[i]
		}
		if i < len(rep.Steps) {
			r.Steps = rep.Steps[i]
		}
		mass := a.Mass
		if i < len(rep.LabelMass) {
			mass = rep.LabelMass[i]
		}
		if !math.IsNaN(mass) {
			r.LabelMass = &mass
		}
		rec.Record(r)
	}
}
