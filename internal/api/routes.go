package api

// routes registers every endpoint of docs/design.md §4 in one place, each with
// who may call it when tokens are in force (auth.go; docs/security.md).
func (s *Server) routes() {
	s.mux.HandleFunc("POST /v1/jobs", s.guard(client, s.handleAccept))
	s.mux.HandleFunc("GET /v1/jobs/{id}", s.guard(client, s.handleShow))
	s.mux.HandleFunc("POST /v1/chat/completions", s.guard(client, s.handleChatCompletions))
	s.mux.HandleFunc("POST /v1/jobs/{id}/retry", s.guard(operator, s.handleRetry))
	s.mux.HandleFunc("POST /v1/jobs/{id}/cancel", s.guard(operator, s.handleCancel))
	s.mux.HandleFunc("POST /v1/batches", s.guard(client, s.handleBatchAccept))
	s.mux.HandleFunc("GET /v1/batches/{id}", s.guard(client, s.handleBatchShow))
	s.mux.HandleFunc("GET /v1/batches/{id}/output", s.guard(client, s.handleBatchOutput))
	s.mux.HandleFunc("GET /v1/batches/{id}/errors", s.guard(client, s.handleBatchErrors))
	s.mux.HandleFunc("GET /v1/batches", s.guard(client, s.handleBatchList))
	s.mux.HandleFunc("POST /v1/batches/{id}/cancel", s.guard(client, s.handleBatchCancel)) // a client cancels its own batch (docs/batches.md)
	s.mux.HandleFunc("POST /v1/files", s.guard(client, s.handleFileUpload))
	s.mux.HandleFunc("GET /v1/files/{id}", s.guard(client, s.handleFileShow))
	s.mux.HandleFunc("GET /v1/files/{id}/content", s.guard(client, s.handleFileContent))
	s.mux.HandleFunc("GET /v1/models", s.guard(client, s.handleModelList))
	s.mux.HandleFunc("GET /v1/models/{model...}", s.guard(client, s.handleModelShow))
	s.mux.HandleFunc("GET /healthz", s.guard(public, s.handleHealth))
	s.mux.HandleFunc("GET /readyz", s.guard(public, s.handleReady))
	s.mux.HandleFunc("GET /v1/overview", s.guard(operator, s.handleOverview))
	s.mux.HandleFunc("GET /metrics", s.guard(operator, s.metricsHandler().ServeHTTP))
	s.mux.HandleFunc("GET /{$}", s.guard(operator, s.handleDashboard))
	s.mux.HandleFunc("GET /jobs/{id}", s.guard(operator, s.handleJobPage))
	s.mux.HandleFunc("GET /static/", s.guard(public, staticHandler().ServeHTTP))
	s.mux.HandleFunc("GET /signin", s.guard(public, s.handleSignInPage))
	s.mux.HandleFunc("POST /signin", s.guard(public, s.handleSignIn))
	s.mux.HandleFunc("POST /signout", s.guard(operator, s.handleSignOut))
	s.mux.HandleFunc("GET /openapi.json", s.guard(public, handleOpenAPI)) // every route described (openapi.go, docs/api.md)
}
