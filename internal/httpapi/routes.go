package httpapi

import (
	"net/http"

	"system1/internal/systemone"
	"system1/internal/web"
)

// routes maps the whole HTTP surface.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/systemone", s.api(s.handleSystemOne))
	mux.Handle("GET /v1/models", s.api(s.handleModels))
	mux.Handle("POST /v1/feedback", s.api(s.handleFeedback))
	mux.Handle("GET /v1/calibration", s.api(s.handleCalibration))
	if s.opt.Decide != nil {
		mux.Handle("POST /v1/decide", s.api(s.handleDecide))
	}
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.Handle("GET /metrics", s.opt.Metrics.Handler())
	if !s.opt.NoPage {
		web.Register(mux) // GET / alone, /docs, /ui/*, /openapi.json; the rest stays 404 below
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, systemone.NotFoundBody)
	})
	return s.observe(mux)
}
