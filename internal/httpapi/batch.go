package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"system1/internal/answer"
	"system1/internal/decision"
	"system1/internal/decisionlog"
	"system1/internal/systemone"
)

// handleSystemOneBatch answers POST /v1/systemone/batch, laya-serve's
// extension of the wire: one questions map over 1 to
// systemone.MaxBatchStates states. The batch is checked whole before any
// state is asked, as /v1/systemone checks a request: Jev 1.14's images,
// an unknown top-level field or model are a 400, any other problem a
// 422 naming each (a state's as states.<i>), a bad header too; then
// every state is answered as POST /v1/systemone would answer it alone
// (the same headers: corrections, gate, coverage; the decision cache),
// recorded under a request id of its own, and the reply holds, in the
// states' order, each state's response or the error body its request
// would have got, with that error's status: a state with a question
// system1 will not stand behind is that state's own 422. A batch no state of
// which was answered, for a reason that is not the caller's (no node
// serves the model, none answered), is refused whole as the first
// state's request would have been, so that a client tries it again.
// The batch counts against the caller's rate as its states do.
func (s *Server) handleSystemOneBatch(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := readSystemOneBody(w, r)
	if !ok {
		return
	}
	p := systemone.ParseBatchRequest(body)
	req, gate, coverage, ok := s.openSystemOne(w, r, &p.Parsed, p.Validate, "a batch takes model, states and questions")
	if !ok {
		return
	}
	s.chargeBatch(r, len(p.States))
	// The answer path bounds the batch by the rounds its states take; the
	// response must still be written after that (http.Server's
	// WriteTimeout counts from the request's start).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.batchTimeout() + 10*time.Second))
	ids := make([]string, len(p.States))
	for i := range ids {
		ids[i] = decisionlog.NewRequestID()
	}
	req.State = nil
	answers, errs := s.opt.Answer.AnswerBatch(r.Context(), answer.Batch{
		Request: answer.Request{Request: req, Face: decisionlog.FaceSystemOne, Start: start, Gate: gate, Coverage: coverage},
		States:  p.States, IDs: ids, Timeout: s.opt.RequestTimeout})

	results := make([][]byte, len(p.States))
	statuses := make([]int, len(p.States))
	var usage answer.Usage
	cost := new(decision.USD) // unknown (nil) once an answered state's is
	answered := 0
	var failed []int
	for i, a := range answers {
		if errs[i] != nil {
			failed = append(failed, i)
			var body []byte
			statuses[i], _, body = failureReply(errs[i], p.Model)
			results[i] = systemone.AppendBatchError(nil, statuses[i], body)
			continue
		}
		// A state system1 refuses is its own 422, as its request alone
		// would be; its tokens were still spent.
		usage = usage.Add(a.Usage)
		cost = answer.AddCost(cost, a.Cost)
		answered++
		out, status, body := s.systemOneResult(r, p.Questions, req.Questions, gate, a)
		if out == nil {
			statuses[i], results[i] = status, systemone.AppendBatchError(nil, status, body)
			continue
		}
		out.Latency = a.Took
		results[i] = out.AppendJSON(make([]byte, 0, 512))
	}
	// A state that failed as the caller's error (a 422 of its own) is one a
	// retry of the whole batch would not mend.
	if answered == 0 && !slices.Contains(statuses, http.StatusUnprocessableEntity) {
		noteFailure(r.Context(), errs[0])
		writeFailure(w, errs[0], p.Model)
		return
	}
	noteLog(r.Context(), "states", len(p.States))
	noteLog(r.Context(), "answered", answered)
	if len(failed) > 0 {
		// The states no node answered, as a request alone logs its
		// failure: the first few, then how many more.
		var why []string
		for _, i := range failed[:min(len(failed), maxLoggedFailures)] {
			why = append(why, fmt.Sprintf("states.%d: %s", i, failureText(errs[i])))
		}
		if more := len(failed) - maxLoggedFailures; more > 0 {
			why = append(why, fmt.Sprintf("and %d more", more))
		}
		noteLog(r.Context(), "error", strings.Join(why, "; "))
	}
	setCost(w.Header(), cost)
	writeJSON(w, http.StatusOK, systemone.AppendBatchResponse(make([]byte, 0, 64+len(results)*512), results, ids, systemone.Usage(usage)))
}

// maxLoggedFailures bounds the failed states a batch's log line names.
const maxLoggedFailures = 3

// chargeBatch counts a batch of n against its caller's rate as n
// requests: the one its admission took, and n-1 more taken into debt, so
// that a batch is no way around the rate limit.
func (s *Server) chargeBatch(r *http.Request, n int) {
	ri := info(r.Context())
	ri.limiter.charge(ri.caller, n-1, time.Now())
}

// batchTimeout bounds a whole batch request: as many request timeouts as
// a batch has states, which a batch asked one state at a time takes at
// most. The answer path bounds it more tightly, by its rounds.
func (s *Server) batchTimeout() time.Duration {
	return s.opt.RequestTimeout * systemone.MaxBatchStates
}

// handleDecideBatch serves POST /v1/decide/batch: one decide question over
// 1 to gateway.MaxBatchContexts contexts, each decided as POST /v1/decide
// decides it alone (gateway.DecideBatch). A batch that cannot be read or
// is invalid is a 422 with the batch's error; otherwise the status is
// what every result's would be when they agree (the gateway misconfigured
// is a 503 for each), or the first's when every context failed for a
// reason that is not the caller's (a 5xx each), else 200, and each
// result carries its own.
func (s *Server) handleDecideBatch(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeDecideBatchError)
	if !ok {
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.batchTimeout() + 10*time.Second))
	// Counted before its contexts are asked, as a System One batch is:
	// counted once answered, batches sent side by side were each let in
	// on one token.
	res := s.opt.Decide.DecideBatch(r.Context(), body, RequestID(r.Context()), func(n int) { s.chargeBatch(r, n) })
	status := http.StatusOK
	switch {
	case res.Error != nil:
		status = http.StatusUnprocessableEntity
	case len(res.Results) > 0:
		status = decideStatus(res.Results[0])
		for _, one := range res.Results[1:] {
			// Results that differ are a 200, each with its own, unless
			// none was answered and none failed as the caller's error:
			// then the batch is refused as its first context's request
			// would be, so that a client tries it again.
			if st := decideStatus(one); st != status && (st < http.StatusInternalServerError || status < http.StatusInternalServerError) {
				status = http.StatusOK
				break
			}
		}
	}
	writeDecide(w, status, res)
}
