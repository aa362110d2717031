package httpapi

import (
	"net/http"
	"strings"

	"system1/internal/systemone"
	"system1/internal/web"
)

// routes maps the whole HTTP surface.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// allowed are the methods each path answers, for the 405 of another.
	allowed := map[string][]string{}
	handle := func(method, path string, h http.Handler) {
		mux.Handle(method+" "+path, h)
		allowed[path] = append(allowed[path], method)
		if method == http.MethodGet {
			allowed[path] = append(allowed[path], http.MethodHead) // a GET pattern answers HEAD too
		}
	}
	handle(http.MethodPost, "/v1/systemone", s.api(s.handleSystemOne))
	handle(http.MethodGet, "/v1/models", s.api(s.handleModels))
	handle(http.MethodPost, "/v1/feedback", s.api(s.handleFeedback))
	handle(http.MethodGet, "/v1/calibration", s.api(s.handleCalibration))
	if s.opt.Decide != nil {
		handle(http.MethodPost, "/v1/decide", s.api(s.handleDecide))
	}
	handle(http.MethodGet, "/health", http.HandlerFunc(s.handleHealth))
	handle(http.MethodGet, "/metrics", s.opt.Metrics.Handler())
	if !s.opt.NoPage {
		web.Register(mux) // GET / alone, /docs, /ui/*, /openapi.json; the rest stays 404 below
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A known path asked with another method is FastAPI's 405, as
		// hosted Jev answers it; anything else its 404.
		if methods, ok := allowed[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, systemone.MethodNotAllowedBody)
			return
		}
		writeJSON(w, http.StatusNotFound, systemone.NotFoundBody)
	})
	return s.observe(mux)
}
