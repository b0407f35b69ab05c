package api

import (
	_ "embed"
	"net/http"
	"slices"
	"sync"
)

// OpenAPI is GET /openapi.json: the OpenAPI 3.1 description of every route
// (docs/api.md is its guide). It is a file, not generated: the test
// TestOpenAPI_EveryRouteAnswersAsDescribed walks every registered route
// and checks the server's real answers against it, so a route, field,
// status or error code that is not described fails that test.
//
//go:embed openapi.json
var OpenAPI []byte

func handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(OpenAPI)
}

// routeMux is the server's http.ServeMux, remembering every pattern it
// was given, so the spec test walks the routes that are really served
// (routes.go stays a plain list of HandleFunc lines).
type routeMux struct {
	*http.ServeMux
	mu       sync.Mutex
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.mu.Lock()
	m.patterns = append(m.patterns, pattern)
	m.mu.Unlock()
	m.ServeMux.Handle(pattern, h)
}

// Routes lists the pattern of every registered route ("POST /v1/jobs",
// "GET /static/", …), sorted.
func (s *Server) Routes() []string {
	s.mux.mu.Lock()
	defer s.mux.mu.Unlock()
	return slices.Sorted(slices.Values(s.mux.patterns))
}
