package httpapi

import (
	"cmp"
	"encoding/json"
	"net/http"

	"system1/internal/gateway"
	"system1/internal/systemone"
)

// handleDecide serves POST /v1/decide: the same request and response as
// the MCP tool system1_decide. The HTTP status says the outcome to
// programs (200 decided or abstained, 422 invalid_request, 503
// config_error, 504 provider_timeout, 502 provider_error and
// malformed_response); the body is the decide response either way, with
// the request id of x-typesafe-request-id unless the request names one.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, writeDecideError)
	if !ok {
		return
	}
	// The gateway's answer path takes the nodes' addresses out of what it
	// reports (answer.Options.Local is off for serve).
	res := s.opt.Decide.Decide(r.Context(), body, RequestID(r.Context()))
	writeDecide(w, decideStatus(res), res)
}

// writeDecide writes a decide response, or a batch's.
func writeDecide(w http.ResponseWriter, status int, res any) {
	data, err := json.Marshal(res)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, status, append(data, '\n'))
}

// writeDecideError is the errorWriter of /v1/decide: an error written
// outside the handler (a key missing or wrong, a rate limit, a body it
// cannot take, a wrong method) is a decide response too, refused with
// the code of its kind and the request's id.
func writeDecideError(w http.ResponseWriter, status int, typ, msg string) {
	writeDecide(w, status, gateway.Refused(w.Header().Get(systemone.RequestIDHeader), decideCode(typ), msg))
}

// writeDecideBatchError is writeDecideError for /v1/decide/batch: the
// batch refused whole.
func writeDecideBatchError(w http.ResponseWriter, status int, typ, msg string) {
	writeDecide(w, status, gateway.RefusedBatch(w.Header().Get(systemone.RequestIDHeader), decideCode(typ), msg))
}

// decideCodes are the decide contract's codes for the kinds of error the
// middleware names; any other kind is invalid_request.
var decideCodes = map[string]string{
	systemone.Authentication:    gateway.CodeUnauthorized,
	systemone.RateLimit:         gateway.CodeRateLimited,
	systemone.Permission:        gateway.CodeForbidden,
	systemone.InsufficientQuota: gateway.CodeOverBudget,
}

func decideCode(typ string) string { return cmp.Or(decideCodes[typ], gateway.CodeInvalidRequest) }

// decideStatuses are the HTTP statuses of decide's error codes; any other
// code is a 502.
var decideStatuses = map[string]int{
	gateway.CodeInvalidRequest:  http.StatusUnprocessableEntity,
	gateway.CodeConfigError:     http.StatusServiceUnavailable,
	gateway.CodeProviderTimeout: http.StatusGatewayTimeout,
}

// decideStatus is the HTTP status for a decide response.
func decideStatus(res *gateway.Response) int {
	if res.Error == nil {
		return http.StatusOK
	}
	return cmp.Or(decideStatuses[res.Error.Code], http.StatusBadGateway)
}
