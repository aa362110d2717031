package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"system1/internal/gateway"
	"system1/internal/redact"
)

// handleDecide serves POST /v1/decide: the same request and response as
// the MCP tool system1_decide. The HTTP status says the outcome to
// programs (200 decided or abstained, 422 invalid_request, 503
// config_error, 504 provider_timeout, 502 provider_error and
// malformed_response); the body is the decide response either way, with
// the request id of x-typesafe-request-id unless the request names one.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) {
	id := RequestID(r.Context())
	body, err := io.ReadAll(r.Body)
	var res *gateway.Response
	status := http.StatusOK
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		res, status = gateway.Invalid(id, fmt.Sprintf("the request body is over the limit of %d bytes (max_body_bytes; a gzip body counts as it decompresses)", tooBig.Limit)), http.StatusRequestEntityTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		res, status = gateway.Invalid(id, "the request body did not arrive within the server's read timeout"), http.StatusRequestTimeout
	case err != nil:
		res, status = gateway.Invalid(id, "reading the request body: "+err.Error()), http.StatusBadRequest
	default:
		res = s.opt.Decide.Decide(r.Context(), body, id)
		status = decideStatus(res)
	}
	redactResponse(res)
	data, err := json.Marshal(res)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, status, append(data, '\n'))
}

// decideStatus is the HTTP status for a decide response.
func decideStatus(res *gateway.Response) int {
	if res.Error == nil {
		return http.StatusOK
	}
	switch res.Error.Code {
	case gateway.CodeInvalidRequest:
		return http.StatusUnprocessableEntity
	case gateway.CodeConfigError:
		return http.StatusServiceUnavailable
	case gateway.CodeProviderTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// redactResponse takes node and provider addresses out of what an HTTP
// caller reads: errors of engines and of the HTTP client name their URLs.
func redactResponse(res *gateway.Response) {
	res.Rationale = redact.Text(res.Rationale)
	if res.Error != nil {
		res.Error.Message = redact.Text(res.Error.Message)
	}
	for i := range res.Attempts {
		res.Attempts[i].Detail = redact.Text(res.Attempts[i].Detail)
	}
}
