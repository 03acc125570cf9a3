package broker

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// mcpRoutes mounts an MCP endpoint's methods (streamable HTTP: POST
// messages, GET the server's stream, DELETE the session) on r at pattern.
func mcpRoutes(r chi.Router, s *Server, pattern string, h http.HandlerFunc) {
	r.With(s.limitBody(s.cfg.MaxToolBody), s.checkedBody).Post(pattern, h)
	r.Get(pattern, h)
	r.Delete(pattern, h)
}

// checkedBody reads an MCP message through readJSON, as every JSON body
// is read (the body budget, the depth limit, one meaning per key), and
// hands the checked bytes on to the MCP server.
func (s *Server) checkedBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := s.readJSON(w, r)
		if err != nil {
			writeProblem(w, r, s.logger, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.ContentLength = int64(len(data))
		next.ServeHTTP(w, r)
	})
}

// serveSessionMCP serves /v1/mcp: one workspace per MCP session.
func (s *Server) serveSessionMCP(w http.ResponseWriter, r *http.Request) {
	s.mcp.ServeSessions(w, r, tenantFrom(r.Context()), serviceRequest(r))
}

// serveWorkspaceMCP serves /v1/workspaces/{id}/mcp: the tools bound to
// the workspace withWorkspace resolved for the caller's tenant.
func (s *Server) serveWorkspaceMCP(w http.ResponseWriter, r *http.Request) {
	s.mcp.ServeWorkspace(w, r, tenantFrom(r.Context()), workspaceFrom(r.Context()), serviceRequest(r))
}

// isMCPStream reports whether r opens an MCP server-to-client stream (GET
// on an MCP endpoint), which stays open for the session: it counts
// against the tenant's rate, not its concurrent calls.
func isMCPStream(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/mcp")
}

// MCPSessions reports how many MCP sessions the tenant holds open.
func (s *Server) MCPSessions(tenantName string) int { return s.mcp.Sessions(tenantName) }
