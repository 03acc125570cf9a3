package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/broker/httpguard"
	"github.com/wsbroker/wsbroker/mcp"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/wire"
	"github.com/wsbroker/wsbroker/workspaces"
)

// Server is the broker's HTTP layer: it decodes requests, authenticates
// them, calls the workspace service and encodes its answers.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	svc     *workspaces.Service
	audit   *audit.Log
	metrics *metrics
	mcp     *mcp.Server
	handler http.Handler
	// unauth limits the requests that fail authentication, per peer;
	// unauthLog bounds what they write to the audit, over all peers.
	unauth    *httpguard.PeerLimiter
	unauthLog *unauthTrail
	bodies    *httpguard.BodyBudget                 // bytes of request bodies held at once
	hosts     httpguard.HostSet                     // the Host names the broker answers for
	conns     atomic.Pointer[httpguard.ConnLimiter] // Serve's listener, for OpenConns
}

func workspaceInfo(i workspaces.Info) wire.WorkspaceInfo {
	out := wire.WorkspaceInfo{ID: i.ID, Backend: i.Backend, Root: i.Root, CreatedAt: i.CreatedAt, Gone: i.Gone}
	if c := i.Confinement; c != nil {
		out.Confinement = &wire.Confinement{
			Sandboxed: c.Sandboxed, User: c.User, UID: c.UID, NoNewPrivs: c.NoNewPrivs, PrivateTmp: c.PrivateTmp,
			Network: c.Network, LandlockABI: c.LandlockABI, Seccomp: c.Seccomp, PIDNamespace: c.PIDNamespace, Cgroup: c.Cgroup,
		}
	}
	if t := i.Transport; t != nil {
		out.Transport = &wire.Transport{Agent: t.Agent, Detail: t.Detail}
	}
	if d := i.Disk; d != nil {
		out.Disk = &wire.Disk{UsedBytes: d.UsedBytes, LimitBytes: d.LimitBytes}
	}
	for _, v := range i.Env {
		out.Env = append(out.Env, wire.EnvName{Name: v.Name, Secret: v.Secret})
	}
	return out
}

// envVars are the wire's variables as the service takes them.
func envVars(in []wire.EnvVar) []workspaces.EnvVar {
	out := make([]workspaces.EnvVar, len(in))
	for i, v := range in {
		out[i] = workspaces.EnvVar{Name: v.Name, Value: v.Value, Secret: v.Secret}
	}
	return out
}

// New builds a Server over backends, keyed by registry name, and adopts the
// workspaces that backends implementing opsapi.Rediscoverer still hold.
// The caller owns the backends and closes them after Shutdown.
func New(cfg Config, backends map[string]opsapi.Backend, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Tenants
	if reg == nil {
		// The single-token setup: one default tenant, admin of its broker.
		var err error
		if reg, err = tenant.NewRegistry(tenant.WithTokens(tenant.DefaultName, true, cfg.Tokens...)); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	s := &Server{cfg: cfg, logger: logger, audit: cfg.Audit, metrics: newMetrics(backends),
		unauth: httpguard.NewPeerLimiter(cfg.UnauthPerSecond, cfg.UnauthBurst, cfg.UnauthPeers),
		bodies: httpguard.NewBodyBudget(cfg.MaxBodyBytesInFlight), hosts: httpguard.NewHostSet(cfg.AllowedHosts, cfg.Addr)}
	svc, err := workspaces.New(workspaces.Config{
		Backends:       backends,
		DefaultBackend: cfg.DefaultBackend,
		Tenants:        reg,
		Audit:          cfg.Audit,
		OwnersFile:     cfg.OwnersFile,
		EnvFile:        cfg.EnvFile,
		ProcessDir:     cfg.ProcessDir,
		Processes:      cfg.Processes,
		Observer:       s.metrics,
		Profiles:       cfg.Profiles,
	}, logger)
	if err != nil {
		return nil, err
	}
	s.svc = svc
	s.unauthLog = newUnauthTrail(cfg, s.metrics.Denied, logger)
	mcpCfg := cfg.MCP
	if mcpCfg.MaxBatchMessages == 0 {
		mcpCfg.MaxBatchMessages = cfg.MaxBatchCalls // one batch cap for both routes
	}
	if s.mcp, err = mcp.New(svc, mcpCfg, "", logger.With("component", "mcp")); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	s.handler = s.routes()
	return s, nil
}

// SetTenants swaps in a new tenant registry: a rotated token works and a
// removed one stops at the next request, without a restart.
func (s *Server) SetTenants(reg *tenant.Registry) { s.svc.SetTenants(reg) }

// Tenants returns the registry in force.
func (s *Server) Tenants() *tenant.Registry { return s.svc.Tenants() }

// Service returns the workspace service the server calls, for other
// front ends (MCP) to call the same.
func (s *Server) Service() *workspaces.Service { return s.svc }

// BodyBytesInFlight reports the bytes of request bodies the broker holds
// now, against Config.MaxBodyBytesInFlight.
func (s *Server) BodyBytesInFlight() int64 { return s.bodies.InUse() }

// OpenConns reports the connections Serve holds open now, against
// Config.MaxConns.
func (s *Server) OpenConns() int {
	if l := s.conns.Load(); l != nil {
		return l.Open()
	}
	return 0
}

// Handler returns the broker's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server for s with the configured address,
// header limits and timeouts (ReadHeaderTimeout against slowloris).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		TLSConfig:         s.cfg.TLS,
		Addr:              s.cfg.Addr,
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
}

// ListenAndServe listens on the configured address and serves until ctx
// ends; see Serve.
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, kills running commands, and lets other in-flight requests
// finish within ShutdownGrace before closing their connections. Nothing is
// destroyed: workspaces outlive the process.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	limited := httpguard.LimitConns(ln, s.cfg.MaxConns, s.cfg.MaxConnsPerPeer)
	s.conns.Store(limited)
	ln = limited
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.logger.Info("broker listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		_ = s.Shutdown(context.Background())
		return fmt.Errorf("broker: %w", err)
	case <-ctx.Done():
	}
	s.logger.Info("broker shutting down", "grace", s.cfg.ShutdownGrace)
	graceCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	shutErr := make(chan error, 1)
	go func() { shutErr <- hs.Shutdown(graceCtx) }()
	cmdErr := s.Shutdown(graceCtx)
	err := <-shutErr
	if err != nil {
		_ = hs.Close()
	}
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return errors.Join(cmdErr, err)
}

// Shutdown cancels every running command (exec calls and bash tool calls)
// and waits until they have returned, or ctx ends. New commands are refused
// from then on. It destroys nothing and does not close listeners.
func (s *Server) Shutdown(ctx context.Context) error {
	s.unauthLog.stop()
	return s.svc.Shutdown(ctx)
}
