package answer

import (
	"math"
	"time"

	"system1/internal/decisionlog"
)

// Recorder takes the record of every answered question. It must not
// block.
type Recorder interface {
	Record(decisionlog.Record)
}

// The decision log records answers (a nil *decisionlog.Log records
// nothing).
var _ Recorder = (*decisionlog.Log)(nil)

// record gives the recorder one record per question of a: the engine's
// distribution, the steps applied and the final one, with who asked.
func (s *Service) record(req Request, a *Answer) {
	if s.opt.Recorder == nil {
		return
	}
	now := time.Now()
	for i, q := range req.Questions {
		got := a.Questions[i]
		if got.Dist == nil { // declined by the node: no reading to record
			continue
		}
		keys := make([]string, len(q.Options))
		for j, o := range q.Options {
			keys[j] = o.Key
		}
		r := decisionlog.Record{
			RequestID:   req.RequestID,
			QuestionID:  q.ID,
			Time:        now,
			Face:        req.Face,
			Model:       got.Model,
			Node:        got.Node,
			Fingerprint: got.Fingerprint,
			Kind:        q.Kind,
			Options:     keys,
			EngineDist:  got.Engine,
			Steps:       got.Steps,
			Final:       got.Dist,
			State:       req.State,
			Question:    &req.Questions[i],
			Cost:        got.Cost,
			Cascade:     req.Cascade,
			Stage:       req.Stage,
			Key:         req.Key,
			InputTokens: got.InputTokens, OutputTokens: got.OutputTokens,
		}
		if !req.Start.IsZero() {
			r.Latency = now.Sub(req.Start)
		}
		if mass := got.LabelMass; !math.IsNaN(mass) {
			r.LabelMass = &mass
		}
		s.opt.Recorder.Record(r)
	}
}
