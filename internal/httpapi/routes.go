package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"time"

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

// routes maps the whole HTTP surface, each route with what it needs
// (s.table, the one home of which route needs which scope). Each API
// route names its wire, which writes every error of the route: its
// handler's, its middleware's, and a 405 on its path.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.table = nil
	handle := func(method, path string, needs Scope, h http.Handler) {
		// The table names a path as the OpenAPI document does: a
		// wildcard's "..." is the mux's own word.
		s.table = append(s.table, Route{Method: method, Path: strings.Replace(path, "...}", "}", 1), Needs: needs})
		mux.Handle(method+" "+path, h)
	}
	wires := map[string]wire{} // the API paths'
	api := func(method, path string, wr wire, scope Scope, h http.HandlerFunc, timeout time.Duration) {
		wires[path] = wr
		handle(method, path, scope, s.api(wr, scope, h, timeout))
	}
	timeout, batch := s.opt.RequestTimeout, s.batchTimeout()
	api(http.MethodPost, "/v1/systemone", jevWire, ScopeDecide, s.handleSystemOne, timeout)
	api(http.MethodPost, "/v1/systemone"+systemone.BatchPath, jevWire, ScopeDecide, s.handleSystemOneBatch, batch)
	api(http.MethodPost, "/v1/decisions", decisionsWire, ScopeDecide, s.handleDecisions, timeout)
	api(http.MethodGet, "/v1/models", modelsWire, AnyKey, s.handleModels, timeout)
	api(http.MethodGet, "/v1/models/{id...}", modelsWire, AnyKey, s.handleModel, timeout)
	api(http.MethodPost, "/v1/feedback", systemOneWire, ScopeFeedback, s.handleFeedback, timeout)
	api(http.MethodGet, "/v1/calibration", systemOneWire, ScopeRead, s.handleCalibration, timeout)
	api(http.MethodGet, "/v1/shadow", systemOneWire, ScopeRead, s.handleShadow, timeout)
	api(http.MethodGet, "/v1/usage", systemOneWire, ScopeRead, s.handleUsage, timeout)
	if s.opt.Decide != nil {
		api(http.MethodPost, "/v1/decide", decideWire, ScopeDecide, s.handleDecide, timeout)
		api(http.MethodPost, "/v1/decide/batch", decideBatchWire, ScopeDecide, s.handleDecideBatch, batch)
	}
	handle(http.MethodGet, "/health", Open, http.HandlerFunc(s.handleHealth))
	handle(http.MethodGet, "/livez", Open, http.HandlerFunc(s.handleLivez))
	handle(http.MethodGet, "/readyz", Open, http.HandlerFunc(s.handleReadyz))
	handle(http.MethodGet, "/metrics", Open, s.opt.Metrics.Handler())
	if !s.opt.NoPage {
		s.table = append(s.table, Route{Method: http.MethodGet, Path: "/", Needs: Open})
		web.Register(mux) // GET / alone, /docs, /ui/*, /openapi.json; the rest stays 404 below
	}
	for _, p := range openAIUnmatchedPatterns {
		mux.Handle(p, openAIUnmatched(mux, strings.HasPrefix(p, "/v1/models")))
	}
	mux.HandleFunc(unmatched, func(w http.ResponseWriter, r *http.Request) {
		// A known path asked with another method is a 405 in its route's
		// wire (FastAPI's, as hosted Jev answers it, on System One's and
		// off the API); anything else FastAPI's 404.
		if methods := allowed(mux, r); len(methods) > 0 {
			allow := strings.Join(methods, ", ")
			w.Header().Set("Allow", allow)
			wr, ok := wires[r.URL.Path]
			if !ok {
				wr = systemOneWire // the page's and the probes'
			}
			wr.start(w, r)
			wr.errs(w, http.StatusMethodNotAllowed, systemone.InvalidRequest, "Method Not Allowed: "+r.URL.Path+" takes "+allow)
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
