package workspaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
	"github.com/wsbroker/wsbroker/tools"
	"github.com/wsbroker/wsbroker/workspaces/bgproc"
)

// rediscoverTimeout bounds the backends' List calls in New.
const rediscoverTimeout = 30 * time.Second

// ErrNotFound is an unknown workspace (or another tenant's, which is
// answered the same), or an operation the workspace's backend does not
// serve.
var ErrNotFound = errors.New("not found")

// Config configures a Service.
type Config struct {
	// Backends are the backends by registry name; the caller owns them and
	// closes them after Shutdown.
	Backends map[string]opsapi.Backend
	// DefaultBackend is the backend of a create that names none.
	DefaultBackend string
	// Tenants is the tenant registry in force; SetTenants swaps it.
	Tenants *tenant.Registry
	// Audit receives one record per tool call; nil records nothing.
	Audit *audit.Log
	// OwnersFile keeps which tenant owns each workspace across restarts;
	// empty keeps it in memory only.
	OwnersFile string
	// Observer hears counts for metrics; nil hears nothing.
	Observer Observer
	// SpillDir is the broker-host directory in which each workspace's
	// toolbox keeps bash's full-output files, out of the workspace's tree
	// (tools.Options.SpillBase); empty is the OS's temp dir. Delete and
	// Shutdown remove them. What they hold counts in the tenant's disk
	// quota.
	SpillDir string
	// SpillBytes bounds each workspace's full-output files; zero is
	// tools.DefaultMaxSpillBytes.
	SpillBytes int64
	// SpillTotalBytes bounds every workspace's full-output files together
	// (tools.SpillBudget); zero is DefaultSpillTotalBytes.
	SpillTotalBytes int64
	// ProcessDir is the broker-host directory that holds the logs of
	// background processes, one directory per workspace; empty is a new
	// directory in the OS's temp dir. What a previous broker left there
	// is removed at start: its processes ended with it.
	ProcessDir string
	// Processes bounds each workspace's background processes.
	Processes bgproc.Limits
	// EnvFile keeps each workspace's environment (SetEnv) across
	// restarts, secrets included, with mode 0600; empty keeps it in
	// memory only.
	EnvFile string
	// Profiles are named workspace specs a create may name instead of a
	// backend and options (CreateSpec).
	Profiles map[string]Profile
}

// Service owns the workspaces of a set of backends and runs every call
// into them.
type Service struct {
	cfg      Config
	logger   *slog.Logger
	backends map[string]opsapi.Backend
	reg      atomic.Pointer[tenant.Registry]
	limits   sync.Map // tenant name -> *tenantLimits
	owners   *ownerStore
	envs     *fileMap[[]EnvVar]
	disk     diskCache
	spill    *tools.SpillBudget // every workspace's full-output files
	obs      Observer

	mu         sync.RWMutex
	workspaces map[string]*Workspace
	creating   map[string]int // tenant -> creates in progress, for the quota
	// diskCreating is tenant -> bytes of disk the creates in progress
	// reserved (reserveDisk).
	diskCreating map[string]int64

	calls    callSet
	stopping chan struct{} // closed when Shutdown begins
	stopOnce sync.Once
}

// Workspace is one live workspace: the backend's, wrapped in its tenant's
// policy Guard, with its tools.
type Workspace struct {
	id        string
	backend   string
	tenant    string
	ws        opsapi.Workspace // the backend's workspace
	guard     *policy.Guard    // the same, behind the tenant's policy: call through it
	toolbox   *tools.Toolbox
	procs     *bgproc.Table
	env       atomic.Pointer[[]EnvVar] // see SetEnv
	createdAt time.Time
}

// Info describes a workspace.
type Info struct {
	ID        string
	Backend   string
	Root      string
	CreatedAt time.Time
	// Gone says why the workspace's sandbox vanished behind the broker's
	// back (opsapi.GoneReporter), "" while it is there.
	Gone string
	// Confinement is what confines the workspace's commands
	// (opsapi.ConfinementReporter); nil when the backend does not say.
	Confinement *opsapi.Confinement
	// Transport is how calls reach the workspace
	// (opsapi.TransportReporter); nil when the backend does not say.
	Transport *opsapi.Transport
	// Disk is the workspace's own filesystem (opsapi.DiskLimiter); nil
	// when it has none.
	Disk *opsapi.Disk
	// Env is the workspace's environment with the values left out.
	Env []EnvVar
}

// ID is the workspace's id.
func (w *Workspace) ID() string { return w.id }

// Backend is the registry name of the workspace's backend.
func (w *Workspace) Backend() string { return w.backend }

// Tenant is the name of the tenant that owns the workspace.
func (w *Workspace) Tenant() string { return w.tenant }

// Info describes the workspace; CreatedAt is in UTC.
func (w *Workspace) Info() Info {
	i := Info{ID: w.id, Backend: w.backend, Root: w.ws.Root(), CreatedAt: w.createdAt.UTC(), Gone: w.gone()}
	for _, v := range w.Env() {
		i.Env = append(i.Env, EnvVar{Name: v.Name, Secret: v.Secret})
	}
	if c, ok := opsapi.As[opsapi.ConfinementReporter](w.ws); ok {
		conf := c.Confinement()
		i.Confinement = &conf
	}
	if t, ok := opsapi.As[opsapi.TransportReporter](w.ws); ok {
		tr := t.Transport()
		i.Transport = &tr
	}
	if l, ok := opsapi.As[opsapi.DiskLimiter](w.ws); ok {
		if d, err := l.Disk(); err == nil && d.LimitBytes > 0 {
			i.Disk = &d
		}
	}
	return i
}

// gone says why the workspace's sandbox vanished, "" while it is there.
func (w *Workspace) gone() string {
	if g, ok := opsapi.As[opsapi.GoneReporter](w.ws); ok {
		return g.Gone()
	}
	return ""
}

// HasTool reports whether the workspace serves the named tool.
func (w *Workspace) HasTool(name string) bool {
	_, ok := w.toolbox.Tool(name)
	return ok
}

// New builds a Service and adopts the workspaces that backends
// implementing opsapi.Rediscoverer still hold.
func New(cfg Config, logger *slog.Logger) (*Service, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Backends) == 0 {
		return nil, errors.New("broker: no backend configured")
	}
	if _, ok := cfg.Backends[cfg.DefaultBackend]; !ok {
		return nil, fmt.Errorf("broker: default backend %q is not configured", cfg.DefaultBackend)
	}
	if cfg.Tenants == nil {
		return nil, errors.New("broker: no tenant registry")
	}
	if err := validateProfiles(cfg.Profiles); err != nil {
		return nil, err
	}
	if cfg.SpillBytes < 0 || cfg.SpillTotalBytes < 0 {
		return nil, fmt.Errorf("broker: spill bounds must not be negative, got %d per workspace and %d in all", cfg.SpillBytes, cfg.SpillTotalBytes)
	}
	s := &Service{
		cfg:          cfg,
		logger:       logger,
		backends:     cfg.Backends,
		obs:          cfg.Observer,
		workspaces:   map[string]*Workspace{},
		creating:     map[string]int{},
		diskCreating: map[string]int64{},
		stopping:     make(chan struct{}),
		spill:        tools.NewSpillBudget(cmp.Or(cfg.SpillTotalBytes, DefaultSpillTotalBytes)),
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	if err := s.prepareProcessDir(); err != nil {
		return nil, err
	}
	s.SetTenants(cfg.Tenants)
	owners, err := loadOwners(cfg.OwnersFile)
	if err != nil {
		return nil, err
	}
	s.owners = owners
	if s.envs, err = loadFileMap[[]EnvVar](cfg.EnvFile, "environment file"); err != nil {
		return nil, err
	}
	for name := range cfg.Backends {
		s.obs.WorkspacesChanged(name, 0)
	}
	if err := s.rediscover(); err != nil {
		return nil, err
	}
	return s, nil
}

// SetTenants swaps in a new tenant registry: a rotated token works and a
// removed one stops at the next call, without a restart. Workspaces of a
// tenant that is gone stay, unreachable until it comes back.
func (s *Service) SetTenants(reg *tenant.Registry) {
	s.reg.Store(reg)
	for _, t := range reg.Tenants() {
		s.limitsFor(t) // apply changed rates to the existing limiters
	}
}

// Tenants returns the registry in force.
func (s *Service) Tenants() *tenant.Registry { return s.reg.Load() }

// policyOf returns the current policy of the tenant called name; a tenant
// that was removed by a reload gets a policy that denies everything.
func (s *Service) policyOf(name string) *policy.Policy {
	if t := s.reg.Load().Lookup(name); t != nil {
		return t.Policy
	}
	return denyAll
}

var denyAll = func() *policy.Policy {
	p := &policy.Policy{Name: "tenant-removed", Tools: policy.Rule{Deny: []string{"*"}},
		Paths:    policy.PathRules{Read: policy.Rule{Deny: []string{"**", "/**"}}, Write: policy.Rule{Deny: []string{"**", "/**"}}},
		Commands: policy.Rule{Deny: []string{"."}}}
	if err := p.Compile(); err != nil { // compiled now: Decide is then safe from many goroutines
		panic(err)
	}
	return p
}()

// rediscover adopts the workspaces that survived a restart.
func (s *Service) rediscover() error {
	ctx, cancel := context.WithTimeout(context.Background(), rediscoverTimeout)
	defer cancel()
	for _, name := range s.backendNames() {
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
			if c, ok := opsapi.As[opsapi.CreationTimer](ws); ok {
				created = c.CreatedAt()
			}
			owner := s.ownerOf(id, ws)
			s.add(id, name, owner, ws, created)
			s.logger.Info("workspace rediscovered", "workspace", id, "backend", name, "root", ws.Root(), "tenant", owner)
		}
	}
	return nil
}

// ownerOf is the owner of a rediscovered workspace: the owners file's,
// else the one its engine holds (a label), else the only tenant when
// there is just one. Otherwise none: a workspace whose owner is unknown
// belongs to no tenant, and only an admin tenant sees it (to delete it).
// backendNames are the backends' names, sorted.
func (s *Service) backendNames() []string {
	names := make([]string, 0, len(s.backends))
	for name := range s.backends {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// findTimeout bounds asking the backends for a workspace another replica
// made.
const findTimeout = 10 * time.Second

// find asks the backends whose engine replicas share (opsapi.Finder) for
// a workspace this broker does not know, one another replica made since
// this one listed its own, and serves it from now on. Only ids of the
// broker's own form are asked for: a mistyped or made-up id costs the
// engine nothing.
func (s *Service) find(ctx context.Context, id string) (*Workspace, bool) {
	if !strings.HasPrefix(id, "ws_") || len(id) > 64 {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, findTimeout)
	defer cancel()
	for _, name := range s.backendNames() {
		f, ok := s.backends[name].(opsapi.Finder)
		if !ok {
			continue
		}
		ws, err := f.Find(ctx, id)
		if err != nil {
			if !errors.Is(err, opsapi.ErrNotExist) {
				s.logger.Warn("asking the engine for a workspace failed", "workspace", id, "backend", name, "err", err)
			}
			continue
		}
		s.mu.RLock()
		w, known := s.workspaces[id]
		s.mu.RUnlock()
		if known { // found meanwhile by another request
			return w, true
		}
		created := time.Now()
		if c, ok := opsapi.As[opsapi.CreationTimer](ws); ok {
			created = c.CreatedAt()
		}
		owner := s.ownerOf(id, ws)
		s.logger.Info("workspace found in the engine (made by another replica)", "workspace", id, "backend", name, "tenant", owner)
		return s.add(id, name, owner, ws, created), true
	}
	return nil, false
}

func (s *Service) ownerOf(id string, ws opsapi.Workspace) string {
	if owner, ok := s.owners.get(id); ok {
		return owner
	}
	if r, ok := opsapi.As[opsapi.OwnerReporter](ws); ok && r.Owner() != "" {
		return r.Owner()
	}
	if all := s.reg.Load().Tenants(); len(all) == 1 {
		return all[0].Name
	}
	s.logger.Warn("rediscovered a workspace whose owner is unknown; only an admin tenant can see and delete it", "workspace", id)
	return ""
}

func (s *Service) add(id, backend, owner string, ws opsapi.Workspace, created time.Time) *Workspace {
	guard := policy.NewGuard(ws, func() *policy.Policy { return s.policyOf(owner) },
		func(ctx context.Context, op string, d policy.Decision) {
			s.logger.Info("policy denied an operation", "workspace", id, "tenant", owner, "op", op, "rule", d.Rule,
				"request_id", requestFrom(ctx).ID)
			notesFrom(ctx).Deny(d.Rule, d.Reason)
		})
	w := &Workspace{
		id:        id,
		backend:   backend,
		tenant:    owner,
		ws:        ws,
		guard:     guard,
		createdAt: created,
		procs:     bgproc.NewTable(filepath.Join(s.cfg.ProcessDir, id), s.cfg.Processes),
	}
	w.toolbox = tools.New(guard, tools.Options{
		Logger:        s.logger.With("workspace", id, "backend", backend, "tenant", owner),
		SpillBase:     s.cfg.SpillDir,
		MaxSpillBytes: s.cfg.SpillBytes,
		SpillBudget:   s.spill,
		EnvFunc:       func() []string { return w.commandEnv(nil) },
	})
	if vars, ok := s.envs.get(id); ok {
		w.setEnv(vars)
	}
	s.mu.Lock()
	s.workspaces[id] = w
	s.mu.Unlock()
	s.obs.WorkspacesChanged(backend, 1)
	return w
}

// Lookup finds workspace id for tenant t. Another tenant's workspace is
// the same ErrNotFound as a missing one, word for word; the caller's
// Notes hear which of the two it was, and the log.
func (s *Service) Lookup(ctx context.Context, t *tenant.Tenant, id string) (*Workspace, error) {
	s.mu.RLock()
	w, ok := s.workspaces[id]
	s.mu.RUnlock()
	if !ok {
		w, ok = s.find(ctx, id)
	}
	if !ok || !reaches(t, w) {
		if ok {
			notes := notesFrom(ctx)
			notes.Deny("tenant", "workspace belongs to another tenant")
			notes.Workspace(id)
			name := ""
			if t != nil {
				name = t.Name
			}
			s.logger.Warn("request for another tenant's workspace", "workspace", id,
				"tenant", name, "request_id", requestFrom(ctx).ID)
		}
		return nil, fmt.Errorf("workspace %q: %w", id, ErrNotFound)
	}
	notesFrom(ctx).Workspace(id)
	return w, nil
}

// remove forgets a workspace; it reports false when it was already gone.
func (s *Service) remove(id string) (*Workspace, bool) {
	s.mu.Lock()
	w, ok := s.workspaces[id]
	delete(s.workspaces, id)
	s.mu.Unlock()
	if ok {
		s.obs.WorkspacesChanged(w.backend, -1)
	}
	return w, ok
}

func (s *Service) readd(w *Workspace) {
	s.mu.Lock()
	s.workspaces[w.id] = w
	s.mu.Unlock()
	s.obs.WorkspacesChanged(w.backend, 1)
}

// reaches reports whether t may use w: its owner, or an admin tenant for
// a workspace whose owner is unknown.
func reaches(t *tenant.Tenant, w *Workspace) bool {
	return t != nil && (w.tenant == t.Name || w.tenant == "" && t.Admin)
}

// List describes the workspaces t reaches, oldest first: its own, and
// for an admin tenant those whose owner is unknown.
func (s *Service) List(t *tenant.Tenant) []Info {
	s.mu.RLock()
	out := make([]Info, 0, len(s.workspaces))
	for _, w := range s.workspaces {
		if reaches(t, w) {
			out = append(out, w.Info())
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

// Ready returns nil when the service is not shutting down and every
// backend that can be pinged (opsapi.Pinger) answers; otherwise
// ErrUnavailable naming the backend.
func (s *Service) Ready(ctx context.Context) error {
	if s.isStopping() {
		return errShuttingDown
	}
	for _, name := range s.backendNames() {
		if p, ok := s.backends[name].(opsapi.Pinger); ok {
			if err := p.Ping(ctx); err != nil {
				return opsapi.E("readyz", "", opsapi.ErrUnavailable, fmt.Errorf("backend %s is not ready: %w", name, err))
			}
		}
	}
	return nil
}

// Tools declares the tools the tenant's policy allows: a model is not
// offered a tool every call of which would be blocked.
func (s *Service) Tools(t *tenant.Tenant) []tools.Definition {
	pol := s.policyOf(t.Name)
	defs := []tools.Definition{}
	for _, d := range tools.Definitions() {
		if pol.Decide(policy.Call{Tool: d.Name}).Allowed {
			defs = append(defs, d)
		}
	}
	return defs
}

// prepareProcessDir makes the directory of background processes' logs,
// empty.
func (s *Service) prepareProcessDir() error {
	if s.cfg.ProcessDir == "" {
		dir, err := os.MkdirTemp("", "wsbroker-processes-")
		if err != nil {
			return fmt.Errorf("broker: background process logs: %w", err)
		}
		s.cfg.ProcessDir = dir
		return nil
	}
	if err := os.RemoveAll(s.cfg.ProcessDir); err != nil {
		return fmt.Errorf("broker: background process logs: %w", err)
	}
	if err := os.MkdirAll(s.cfg.ProcessDir, 0o700); err != nil {
		return fmt.Errorf("broker: background process logs: %w", err)
	}
	return nil
}
