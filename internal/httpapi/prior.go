package httpapi

import (
	"net/http"
	"strings"

	"system1/internal/decision"
)

// PriorHeader is the request header that chooses the prior correction
// for one /v1/systemone request: off, batch or content_free; absent is
// the configured one.
const PriorHeader = "X-System1-Prior"

// choiceHeader reads a request header that picks one of a few values
// (valid; what says them in words), case-insensitively: "" when it is
// absent. A header given twice or holding anything else is the caller's
// error, the problem returned, named by the header.
func choiceHeader(r *http.Request, name string, valid func(string) bool, what string) (string, *decision.Problem) {
	vs := r.Header.Values(name)
	if len(vs) == 0 {
		return "", nil
	}
	v := strings.ToLower(strings.TrimSpace(vs[0]))
	if len(vs) > 1 || v == "" || !valid(v) {
		return "", &decision.Problem{Path: []string{name}, Msg: "the header " + name + " must be " + what + ", once", Type: "value_error"}
	}
	return v, nil
}
