package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"system1/internal/systemone"
	"system1/internal/web"
)

// unmatched is the pattern that catches every request no route serves,
// and unmatchedRoute what observe labels them with: not "/", which reads
// as the page.
const (
	unmatched      = "/"
	unmatchedRoute = "unmatched"
)

// openAIUnmatchedPatterns catch what no route serves under the routes
// OpenAI's clients call, answered in OpenAI's envelope (openAIUnmatched)
// and labelled as unmatched.
var openAIUnmatchedPatterns = []string{"/v1/decisions", "/v1/decisions/", "/v1/models", "/v1/models/"}

// isUnmatched reports whether a pattern is one that catches what no
// route serves.
func isUnmatched(pattern string) bool {
	return pattern == unmatched || slices.Contains(openAIUnmatchedPatterns, pattern)
}

// routes maps the whole HTTP surface.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(method, path string, h http.Handler) { mux.Handle(method+" "+path, h) }
	handle(http.MethodPost, "/v1/systemone", s.api(s.handleSystemOne))
	handle(http.MethodPost, "/v1/systemone"+systemone.BatchPath, s.apiWithin(writeError, s.handleSystemOneBatch, s.batchTimeout()))
	handle(http.MethodPost, "/v1/decisions", openAIRoute(s.apiIn(writeDecisionsAPIError, s.handleDecisions)))
	handle(http.MethodGet, "/v1/models", openAIRoute(s.apiIn(writeModelsAPIError, s.handleModels)))
	handle(http.MethodGet, "/v1/models/{id...}", openAIRoute(s.apiIn(writeModelsAPIError, s.handleModel)))
	handle(http.MethodPost, "/v1/feedback", s.api(s.handleFeedback))
	handle(http.MethodGet, "/v1/calibration", s.api(s.handleCalibration))
	handle(http.MethodGet, "/v1/shadow", s.api(s.handleShadow))
	if s.opt.Decide != nil {
		handle(http.MethodPost, "/v1/decide", s.api(s.handleDecide))
		handle(http.MethodPost, "/v1/decide/batch", s.apiWithin(writeError, s.handleDecideBatch, s.batchTimeout()))
	}
	handle(http.MethodGet, "/health", http.HandlerFunc(s.handleHealth))
	handle(http.MethodGet, "/livez", http.HandlerFunc(s.handleLivez))
	handle(http.MethodGet, "/readyz", http.HandlerFunc(s.handleReadyz))
	handle(http.MethodGet, "/metrics", s.opt.Metrics.Handler())
	if !s.opt.NoPage {
		web.Register(mux) // GET / alone, /docs, /ui/*, /openapi.json; the rest stays 404 below
	}
	for _, p := range openAIUnmatchedPatterns {
		mux.Handle(p, openAIUnmatched(mux, strings.HasPrefix(p, "/v1/models")))
	}
	mux.HandleFunc(unmatched, func(w http.ResponseWriter, r *http.Request) {
		// A known path asked with another method is FastAPI's 405, as
		// hosted Jev answers it; anything else its 404.
		if methods := allowed(mux, r); len(methods) > 0 {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, systemone.MethodNotAllowedBody)
			return
		}
		writeJSON(w, http.StatusNotFound, systemone.NotFoundBody)
	})
	return s.observe(mux)
}

// untraced are the paths whose requests get no span: probes and scrapes,
// which a supervisor and Prometheus send every few seconds to every
// replica, would bury the callers' traces in their own.
var untraced = map[string]bool{"/health": true, "/livez": true, "/readyz": true, "/metrics": true}

// methods are those a 405's Allow may name, in the order it names them.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed lists the methods mux serves on r's path, asking mux itself, so
// that every route is known here however it was registered (the page's
// by web.Register too); none for a path no route serves.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range methods {
		if _, pattern := mux.Handler(&http.Request{Method: m, Host: r.Host, URL: r.URL}); pattern != "" && !isUnmatched(pattern) {
			out = append(out, m)
		}
	}
	return out
}
