package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/wire"
)

// rediscoverTimeout bounds the backends' List calls in New.
const rediscoverTimeout = 30 * time.Second

// Server is the broker's HTTP service: it owns the workspaces and routes
// each request into one of them.
type Server struct {
	cfg      Config
	logger   *slog.Logger
	backends map[string]opsapi.Backend
	reg      atomic.Pointer[tenant.Registry]
	limits   sync.Map // tenant name -> *tenantLimits
	audit    *audit.Log
	owners   *ownerStore
	disk     diskUsage
	metrics  *metrics
	handler  http.Handler

	mu         sync.RWMutex
	workspaces map[string]*workspace
	creating   map[string]int // tenant -> creates in progress, for the quota

	calls    callSet
	stopping chan struct{} // closed when Shutdown begins
	stopOnce sync.Once
}

// workspace is one live workspace with its tools.
type workspace struct {
	id        string
	backend   string
	tenant    string
	ws        opsapi.Workspace // the backend's workspace: test abilities on it
	guard     *policy.Guard    // the same, behind the tenant's policy: call through it
	toolbox   *tools.Toolbox
	createdAt time.Time
}

func (w *workspace) info() wire.WorkspaceInfo {
	return wire.WorkspaceInfo{ID: w.id, Backend: w.backend, Root: w.ws.Root(), CreatedAt: w.createdAt.UTC()}
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
	if len(backends) == 0 {
		return nil, errors.New("broker: no backend configured")
	}
	if _, ok := backends[cfg.DefaultBackend]; !ok {
		return nil, fmt.Errorf("broker: default backend %q is not configured", cfg.DefaultBackend)
	}
	s := &Server{
		cfg:        cfg,
		logger:     logger,
		backends:   backends,
		metrics:    newMetrics(),
		workspaces: map[string]*workspace{},
		creating:   map[string]int{},
		stopping:   make(chan struct{}),
	}
	reg := cfg.Tenants
	if reg == nil {
		// The single-token setup: one default tenant, admin of its broker.
		var err error
		if reg, err = tenant.NewRegistry(tenant.WithTokens(tenant.DefaultName, true, cfg.Tokens...)); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	s.SetTenants(reg)
	s.audit = cfg.Audit
	owners, err := loadOwners(cfg.OwnersFile)
	if err != nil {
		return nil, err
	}
	s.owners = owners
	for name := range backends {
		s.metrics.workspaces.WithLabelValues(name).Set(0)
	}
	if err := s.rediscover(); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// rediscover adopts the workspaces that survived a restart.
func (s *Server) rediscover() error {
	ctx, cancel := context.WithTimeout(context.Background(), rediscoverTimeout)
	defer cancel()
	names := make([]string, 0, len(s.backends))
	for name := range s.backends {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rd, ok := s.backends[name].(opsapi.Rediscoverer)
		if !ok {
			continue
		}
		found, err := rd.List(ctx)
		if err != nil {
			return fmt.Errorf("broker: rediscovering %s workspaces: %w", name, err)
		}
		for id, ws := range found {
			created := time.Now()
			if c, ok := ws.(creationTimer); ok {
				created = c.CreatedAt()
			}
			owner, ok := s.owners.get(id)
			if !ok {
				owner = s.reg.Load().First().Name
			}
			s.add(id, name, owner, ws, created)
			s.logger.Info("workspace rediscovered", "workspace", id, "backend", name, "root", ws.Root())
		}
	}
	return nil
}

// creationTimer is an optional ability of a workspace: when it was made,
// so that a rediscovered workspace keeps its createdAt. Without it the
// rediscovery time stands in.
type creationTimer interface {
	CreatedAt() time.Time
}

func (s *Server) add(id, backend, owner string, ws opsapi.Workspace, created time.Time) *workspace {
	guard := policy.NewGuard(ws, func() *policy.Policy { return s.policyOf(owner) },
		func(ctx context.Context, op string, d policy.Decision) {
			s.logger.Info("policy denied an operation", "workspace", id, "tenant", owner, "op", op, "rule", d.Rule,
				"request_id", middleware.GetReqID(ctx))
			if ra := reqAuditFrom(ctx); ra != nil {
				ra.set(func(ev *audit.Event) { ev.Decision, ev.Rule, ev.Reason = "deny", d.Rule, d.Reason })
			}
		})
	w := &workspace{
		id:        id,
		backend:   backend,
		tenant:    owner,
		ws:        ws,
		guard:     guard,
		createdAt: created,
		toolbox:   tools.New(guard, tools.Options{Logger: s.logger.With("workspace", id, "backend", backend, "tenant", owner)}),
	}
	s.mu.Lock()
	s.workspaces[id] = w
	s.mu.Unlock()
	s.metrics.workspaces.WithLabelValues(backend).Inc()
	return w
}

// lookup finds workspace id for tenant t. Another tenant's workspace is
// the same error as a missing one, word for word; foreign tells the caller
// (for the audit record) which of the two it was.
func (s *Server) lookup(t *tenant.Tenant, id string) (w *workspace, foreign bool, err error) {
	s.mu.RLock()
	w, ok := s.workspaces[id]
	s.mu.RUnlock()
	if !ok || t == nil || w.tenant != t.Name {
		return nil, ok, fmt.Errorf("workspace %q: %w", id, ErrNotFound)
	}
	return w, false, nil
}

// remove forgets a workspace; it reports false when it was already gone.
func (s *Server) remove(id string) (*workspace, bool) {
	s.mu.Lock()
	w, ok := s.workspaces[id]
	delete(s.workspaces, id)
	s.mu.Unlock()
	if ok {
		s.metrics.workspaces.WithLabelValues(w.backend).Dec()
	}
	return w, ok
}

func (s *Server) list(tenantName string) []wire.WorkspaceInfo {
	s.mu.RLock()
	out := make([]wire.WorkspaceInfo, 0, len(s.workspaces))
	for _, w := range s.workspaces {
		if w.tenant == tenantName {
			out = append(out, w.info())
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// idEncoding is lower-case base32 without padding: 16 random bytes make
// exactly 26 characters.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns "ws_" and 128 random bits: unguessable, not enumerable.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "ws_" + idEncoding.EncodeToString(b[:])
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
	s.stopOnce.Do(func() { close(s.stopping) })
	s.calls.cancelAll(errShuttingDown)
	return s.calls.wait(ctx)
}

var errShuttingDown = opsapi.E("broker", "", opsapi.ErrUnavailable, errors.New("the broker is shutting down"))

func (s *Server) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// callSet tracks the running commands so that Shutdown and DELETE can
// cancel them and wait for them.
type callSet struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]call
	zero chan struct{} // closed when m becomes empty, for wait
}

type call struct {
	workspace string
	cancel    context.CancelCauseFunc
}

// start registers a command in workspace id and returns its context and
// the function that ends it.
func (c *callSet) start(parent context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[uint64]call{}
	}
	c.next++
	key := c.next
	c.m[key] = call{workspace: id, cancel: cancel}
	c.mu.Unlock()
	return ctx, func() {
		cancel(nil)
		c.mu.Lock()
		delete(c.m, key)
		if len(c.m) == 0 && c.zero != nil {
			close(c.zero)
			c.zero = nil
		}
		c.mu.Unlock()
	}
}

func (c *callSet) cancelAll(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		cl.cancel(cause)
	}
}

func (c *callSet) cancelWorkspace(id string, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		if cl.workspace == id {
			cl.cancel(cause)
		}
	}
}

// wait returns when no command is running, or with ctx's cause.
func (c *callSet) wait(ctx context.Context) error {
	c.mu.Lock()
	if len(c.m) == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	zero := c.zero
	c.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker: waiting for running commands: %w", context.Cause(ctx))
	}
}

// startCommand registers a command unless the broker is shutting down, and
// keeps the running-commands gauge.
func (s *Server) startCommand(ctx context.Context, id string) (context.Context, func(), error) {
	if s.isStopping() {
		return nil, nil, errShuttingDown
	}
	cctx, end := s.calls.start(ctx, id)
	s.metrics.running.Inc()
	return cctx, func() { s.metrics.running.Dec(); end() }, nil
}
