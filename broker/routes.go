package broker

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/broker/httpguard"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/wire"
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
	// Set before mounting: chi copies it into sub-routers at Mount. A 405
	// is left to chi, which knows the route's methods; answer405 turns it
	// into a problem.
	r.NotFound(s.notFound)

	// No middleware.RealIP: X-Forwarded-For and friends are spoofable, so
	// logs show the peer address the connection really came from.
	r.Use(s.checkHost, middleware.RequestID, s.logRequests, s.metrics.instrument, s.recoverer, s.answer405, httpguard.Pace(s.cfg.BodyIdleTimeout, s.cfg.MinBodyRate))

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.metrics.handler())

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.auditRequests, s.authenticate, s.limit)
		r.Get("/openapi.json", s.openapi)
		r.Get("/audit", s.readAudit)
		r.Get("/tools", s.listTools)
		r.Mount("/workspaces", workspacesResource{s}.Routes())
		mcpRoutes(r, s, "/mcp", s.serveSessionMCP)
	})
	return r
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
	if err := s.audit.Ready(); err != nil {
		s.logger.Error("not ready: the audit trail cannot be written", "err", err)
		writeProblem(w, r, s.logger, fmt.Errorf("%w: the audit trail cannot be written", opsapi.ErrUnavailable))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ready\n")
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}

// listTools declares the tools the caller's policy allows: a model is not
// offered a tool every call of which would be blocked.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, wire.ToolList{Tools: s.svc.Tools(tenantFrom(r.Context()))})
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
