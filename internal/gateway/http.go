package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"system1/internal/redact"
)

// Handler serves POST /v1/decide: the same request and response as the
// MCP tool system1_decide. The HTTP status says the outcome to programs
// (200 decided or abstained, 422 invalid_request, 503 config_error, 504
// provider_timeout, 502 provider_error and malformed_response); the body
// is the response either way. requestID gives the id to use when the
// request has none (nil generates one).
func (g *Gateway) Handler(requestID func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ""
		if requestID != nil {
			id = requestID(r)
		}
		body, err := io.ReadAll(r.Body)
		var res *Response
		status := http.StatusOK
		var tooBig *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooBig):
			res = &Response{Attempts: []Attempt{}, SchemaVersion: SchemaVersion, RequestID: requestID0(id)}
			msg := fmt.Sprintf("the request body is over the limit of %d bytes (max_body_bytes; a gzip body counts as it decompresses)", tooBig.Limit)
			res.fail(CodeInvalidRequest, msg, "The request was not valid: "+msg+". Nothing was asked.")
			status = http.StatusRequestEntityTooLarge
		case errors.As(err, &ne) && ne.Timeout():
			res = &Response{Attempts: []Attempt{}, SchemaVersion: SchemaVersion, RequestID: requestID0(id)}
			msg := "the request body did not arrive within the server's read timeout"
			res.fail(CodeInvalidRequest, msg, "The request was not valid: "+msg+". Nothing was asked.")
			status = http.StatusRequestTimeout
		case err != nil:
			res = &Response{Attempts: []Attempt{}, SchemaVersion: SchemaVersion, RequestID: requestID0(id)}
			msg := "reading the request body: " + err.Error()
			res.fail(CodeInvalidRequest, msg, "The request was not valid: "+msg+". Nothing was asked.")
			status = http.StatusBadRequest
		default:
			res = g.Decide(r.Context(), body, id)
			status = StatusCode(res)
		}
		res.redact()
		data, err := json.Marshal(res)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(append(data, '\n'))
	})
}

// StatusCode is the HTTP status for a response.
func StatusCode(res *Response) int {
	if res.Error == nil {
		return http.StatusOK
	}
	switch res.Error.Code {
	case CodeInvalidRequest:
		return http.StatusUnprocessableEntity
	case CodeConfigError:
		return http.StatusServiceUnavailable
	case CodeProviderTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

func requestID0(id string) string {
	if id != "" {
		return id
	}
	return NewRequestID()
}

// redact takes node and provider addresses out of what an HTTP caller
// reads: errors of engines and of the HTTP client name their URLs.
func (res *Response) redact() {
	res.Rationale = redact.Text(res.Rationale)
	if res.Error != nil {
		res.Error.Message = redact.Text(res.Error.Message)
	}
	for i := range res.Attempts {
		res.Attempts[i].Detail = redact.Text(res.Attempts[i].Detail)
	}
}
