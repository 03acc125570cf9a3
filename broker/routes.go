package broker

import (
	_ "embed"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/tools"
)

// openAPI is the hand-written OpenAPI 3.1 document of every route; a test
// walks the router and holds the two equal.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the broker's OpenAPI 3.1 document.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// routes builds the one middleware stack and mounts the resources.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	// Set before mounting: chi copies them into sub-routers at Mount.
	r.NotFound(s.notFound)
	r.MethodNotAllowed(s.methodNotAllowed)

	// No middleware.RealIP: X-Forwarded-For and friends are spoofable, so
	// logs show the peer address the connection really came from.
	r.Use(middleware.RequestID, s.logRequests, s.metrics.instrument, s.recoverer)

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.metrics.handler())

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.auditRequests, s.authenticate, s.limit)
		r.Get("/openapi.json", s.openapi)
		r.Get("/audit", s.readAudit)
		r.Get("/tools", s.listTools)
		r.Mount("/workspaces", workspacesResource{s}.Routes())
	})
	s.allow = allowTable(r)
	return r
}

// allowTable maps every route pattern to its methods, for the Allow header
// of a 405.
func allowTable(routes chi.Routes) map[string][]string {
	table := map[string][]string{}
	_ = chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = NormalizeRoute(route)
		table[route] = append(table[route], method)
		return nil
	})
	order := map[string]int{http.MethodGet: 0, http.MethodHead: 1, http.MethodPut: 2, http.MethodPost: 3, http.MethodPatch: 4, http.MethodDelete: 5}
	for _, ms := range table {
		sort.Slice(ms, func(i, j int) bool { return order[ms[i]] < order[ms[j]] })
	}
	return table
}

// NormalizeRoute turns a chi route pattern as chi.Walk reports it (with
// mount artifacts such as "/*/" and trailing slashes) into the path form
// used in the OpenAPI document, e.g. "/v1/workspaces/{id}/files".
func NormalizeRoute(route string) string {
	route = strings.ReplaceAll(route, "/*/", "/")
	route = strings.TrimSuffix(route, "/*")
	if len(route) > 1 {
		route = strings.TrimSuffix(route, "/")
	}
	return route
}

// allowed returns the methods of the route pattern that matches path.
func (s *Server) allowed(path string) []string {
	segs := strings.Split(NormalizeRoute(path), "/")
	for pattern, methods := range s.allow {
		ps := strings.Split(pattern, "/")
		if len(ps) != len(segs) {
			continue
		}
		match := true
		for i := range ps {
			param := strings.HasPrefix(ps[i], "{") && segs[i] != ""
			if ps[i] != segs[i] && !param {
				match = false
				break
			}
		}
		if match {
			return methods
		}
	}
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// readyz answers 503 while shutting down or while a backend that can be
// pinged (a container engine, an ssh host) does not answer.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.Ready(r.Context()); err != nil {
		writeProblem(w, r, s.logger, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ready\n")
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}

// ToolList is the body of GET /v1/tools.
type ToolList struct {
	Tools []tools.Definition `json:"tools"`
}

// listTools declares the tools the caller's policy allows: a model is not
// offered a tool every call of which would be blocked.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, ToolList{Tools: s.svc.Tools(tenantFrom(r.Context()))})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, _ *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only a broken value type gets here; it is a programming error.
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
