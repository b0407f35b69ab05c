package api

// routes registers every endpoint of DESIGN.md §4 in one place.
func (s *Server) routes() {
	s.mux.HandleFunc("POST /v1/jobs", s.handleAccept)
	s.mux.HandleFunc("GET /v1/jobs/{id}", s.handleShow)
	s.mux.HandleFunc("POST /v1/jobs/{id}/retry", s.handleRetry)
	s.mux.HandleFunc("POST /v1/jobs/{id}/cancel", s.handleCancel)
	s.mux.HandleFunc("GET /healthz", s.handleHealth)
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	s.mux.HandleFunc("GET /v1/overview", s.handleOverview)
	s.mux.Handle("GET /metrics", s.metricsHandler())
	s.mux.HandleFunc("GET /{$}", s.handleDashboard)
	s.mux.HandleFunc("GET /jobs/{id}", s.handleJobPage)
	s.mux.Handle("GET /static/", staticHandler())
}
