package answer

import (
	"errors"

	"system1/internal/decision"
	"system1/internal/tracing"
)

// The outcomes a question's span records (tracing.Questions.End).
const (
	traceAnswered  = "answered"
	traceAbstained = "abstained"
	traceFailed    = "failed"
)

// endQuestions ends the span of each question of req with what became
// of it: answered, abstained (a System One upstream declined it), or
// failed, with the failure as the log has it. A question answered in a
// request that failed for others is answered. qs is nil when tracing is
// off.
func endQuestions(qs *tracing.Questions, req decision.Request, a *Answer, err error) {
	if qs == nil {
		return
	}
	var f *Failure
	errors.As(err, &f)
	failed := map[string]error{}
	if f != nil {
		for _, p := range f.Problems {
			failed[p.Question] = p.Err
		}
	}
	for i, q := range req.Questions {
		switch perr, ok := failed[q.ID]; {
		case a != nil && a.Questions[i].Refusal != nil:
			qs.End(i, traceAbstained, nil)
		case a != nil:
			qs.End(i, traceAnswered, nil)
		case ok:
			qs.End(i, traceFailed, perr)
		case f != nil && len(f.Problems) == 0, f == nil && err != nil:
			qs.End(i, traceFailed, err) // the request failed as a whole: no node serves its model
		default:
			qs.End(i, traceAnswered, nil)
		}
	}
}
