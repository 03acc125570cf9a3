package mcp

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/workspaces"
)

// Headers the Server sets on each request it hands the SDK, replacing any
// the client sent: a tool handler reads them back (the SDK gives it the
// HTTP request's headers, not its context) to name its audit record.
const (
	headerRequestID = "Wsbroker-Mcp-Request-Id"
	headerAuditID   = "Wsbroker-Mcp-Audit-Id"
	headerSourceIP  = "Wsbroker-Mcp-Source-Ip"
	// headerCarrier names the HTTP request that carries a call, whose
	// end cancels the call.
	headerCarrier = "Wsbroker-Mcp-Carrier"
)

// tenantExtra is the TokenInfo.Extra key of the request's tenant.
const tenantExtra = "wsbroker.tenant"

// serverName is the implementation name the server announces.
const serverName = "wsbroker"

// Server is the MCP server over a workspace service.
type Server struct {
	svc      *workspaces.Service
	cfg      Config
	logger   *slog.Logger
	version  string
	sessions sessionCounter
	live     liveSessions
	carriers carriers

	bound     http.Handler // /v1/workspaces/{id}/mcp
	perClient http.Handler // /v1/mcp
}

// New builds a Server calling svc; version is announced to clients.
func New(svc *workspaces.Service, cfg Config, version string, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if version == "" {
		version = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			version = bi.Main.Version
		}
	}
	s := &Server{svc: svc, cfg: cfg.WithDefaults(), logger: logger, version: version}
	s.sessions.n = map[string]int{}
	s.live.m = map[string]*session{}
	s.carriers.m = map[string]*carrier{}
	// Every request carries a bearer token, which a DNS-rebinding page
	// does not have: the SDK's Host check would only break a broker behind a
	// local reverse proxy.
	opts := &sdk.StreamableHTTPOptions{SessionTimeout: s.cfg.IdleTimeout, Logger: logger, DisableLocalhostProtection: true}
	// The broker authenticated the request already; the SDK's bearer
	// middleware only hands the SDK the caller's identity, with no
	// resource metadata URL: no OAuth is advertised.
	bind := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		if ti, ok := r.Context().Value(identityKey{}).(*auth.TokenInfo); ok {
			return ti, nil
		}
		return nil, fmt.Errorf("%w: %w", auth.ErrInvalidToken, errNoTenant)
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	s.bound = bind(sdk.NewStreamableHTTPHandler(s.boundServer, opts))
	s.perClient = bind(sdk.NewStreamableHTTPHandler(s.sessionServer, opts))
	return s, nil
}

// ProtocolVersions are the MCP protocol versions the server accepts,
// newest first: the SDK's.
func ProtocolVersions() []string { return sdk.SupportedProtocolVersions() }

// ServeWorkspace serves the seven tools bound to wk, which the caller
// resolved for tenant t (another tenant's workspace never gets here).
func (s *Server) ServeWorkspace(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, wk *workspaces.Workspace, req workspaces.Request) {
	ctx := context.WithValue(r.Context(), workspaceKey{}, wk.ID())
	s.serve(s.bound, w, r.WithContext(ctx), t, "workspace:"+wk.ID(), req)
}

type (
	workspaceKey struct{}
	slotKey      struct{}
	identityKey  struct{}
)

// serve binds the request to its tenant and endpoint, answers another
// tenant's (or endpoint's) session id as an unknown one, refuses a batch
// past the cap, takes a session slot for an initialize, and hands the
// request to the SDK. The calls a POST carries go through its carrier
// (see limitCalls) and end with it: a client that drops the connection,
// or ends the session, kills their commands.
func (s *Server) serve(h http.Handler, w http.ResponseWriter, r *http.Request, t *tenant.Tenant, endpoint string, req workspaces.Request) {
	userID := t.Name + "\x00" + endpoint
	ctx := context.WithValue(r.Context(), identityKey{}, &auth.TokenInfo{
		UserID: userID,
		Extra:  map[string]any{tenantExtra: t},
	})
	r = r.WithContext(ctx)
	r.Header = r.Header.Clone()
	s.hideForeignSession(r, userID, req.Notes)
	if r.Method == http.MethodDelete {
		s.live.end(r.Header.Get("Mcp-Session-Id"), userID)
	}
	key := rand.Text()
	if r.Method == http.MethodPost {
		shape := shapeOf(r)
		if reason := s.batchRefusal(shape); reason != "" {
			refuseBatch(w, reason)
			return
		}
		if r.Header.Get("Mcp-Session-Id") == "" && shape.initialize {
			slot, ok := s.sessions.reserve(t.Name, s.cfg.MaxSessionsPerTenant)
			if !ok {
				s.logger.Warn("MCP session refused: the tenant is at its session cap", "tenant", t.Name,
					"cap", s.cfg.MaxSessionsPerTenant, "request_id", req.ID)
				w.Header().Set("Retry-After", "1")
				http.Error(w, fmt.Sprintf("tenant %s has %d MCP sessions open, the most allowed", t.Name, s.cfg.MaxSessionsPerTenant),
					http.StatusTooManyRequests)
				return
			}
			defer slot.releaseUnclaimed()
			r = r.WithContext(context.WithValue(r.Context(), slotKey{}, slot))
		}
		if shape.toolCalls > 0 {
			c := s.newCarrier(r, t, req.Notes, shape.toolCalls)
			s.carriers.put(key, c)
			defer c.end()
			defer s.carriers.remove(key)
		}
	}
	r.Header.Set(headerRequestID, req.ID)
	r.Header.Set(headerAuditID, req.AuditID)
	r.Header.Set(headerSourceIP, req.SourceIP)
	r.Header.Set(headerCarrier, key)
	h.ServeHTTP(w, r)
}

// hideForeignSession replaces a session id that another tenant, or the
// same tenant on another endpoint, opened with one no session has, so
// that the SDK answers it exactly as an unknown id (404), and marks the
// request's record denied: whether a session id exists is not told.
func (s *Server) hideForeignSession(r *http.Request, userID string, notes workspaces.Notes) {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" || !s.live.foreign(id, userID) {
		return
	}
	r.Header.Set("Mcp-Session-Id", rand.Text())
	if notes != nil {
		notes.Deny("tenant", "the MCP session belongs to another tenant or endpoint")
	}
}

// requestOf rebuilds the workspaces.Request the broker named the HTTP
// request carrying a call with.
func requestOf(extra *sdk.RequestExtra) workspaces.Request {
	if extra == nil || extra.Header == nil {
		return workspaces.Request{}
	}
	return workspaces.Request{
		ID:       extra.Header.Get(headerRequestID),
		AuditID:  extra.Header.Get(headerAuditID),
		SourceIP: extra.Header.Get(headerSourceIP),
	}
}

// tenantOf is the tenant of the HTTP request carrying a call: a reloaded
// registry applies at once.
func tenantOf(extra *sdk.RequestExtra) *tenant.Tenant {
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	t, _ := extra.TokenInfo.Extra[tenantExtra].(*tenant.Tenant)
	return t
}

// sessionCounter counts each tenant's open sessions.
type sessionCounter struct {
	mu sync.Mutex
	n  map[string]int
}

// sessionSlot is one session's place under its tenant's cap, taken before
// the session exists; the session claims it at initialize, else the
// request gives it back.
type sessionSlot struct {
	c       *sessionCounter
	tenant  string
	mu      sync.Mutex
	claimed bool
	freed   bool
}

func (c *sessionCounter) reserve(tenantName string, limit int) (*sessionSlot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[tenantName] >= limit {
		return nil, false
	}
	c.n[tenantName]++
	return &sessionSlot{c: c, tenant: tenantName}, true
}

// claim hands the slot to a session, which releases it when it ends.
func (sl *sessionSlot) claim() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.claimed || sl.freed {
		return false
	}
	sl.claimed = true
	return true
}

func (sl *sessionSlot) releaseUnclaimed() {
	sl.mu.Lock()
	if sl.claimed {
		sl.mu.Unlock()
		return
	}
	sl.mu.Unlock()
	sl.release()
}

func (sl *sessionSlot) release() {
	sl.mu.Lock()
	if sl.freed {
		sl.mu.Unlock()
		return
	}
	sl.freed = true
	sl.mu.Unlock()
	sl.c.mu.Lock()
	sl.c.n[sl.tenant]--
	sl.c.mu.Unlock()
}

// Sessions reports how many MCP sessions tenantName holds open.
func (s *Server) Sessions(tenantName string) int {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	return s.sessions.n[tenantName]
}

// tokenInfo is the TokenInfo serve put in r's context.
func tokenInfo(r *http.Request) *auth.TokenInfo { return auth.TokenInfoFromContext(r.Context()) }
