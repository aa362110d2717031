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

// priorHeader reads the prior header, case-insensitively; false means it
// holds something else or is given twice, the caller's error.
func priorHeader(r *http.Request) (string, bool) {
	vs := r.Header.Values(PriorHeader)
	if len(vs) == 0 {
		return "", true
	}
	if len(vs) > 1 {
		return "", false
	}
	v := strings.ToLower(strings.TrimSpace(vs[0]))
	return v, v != "" && decision.ValidPrior(v)
}
