package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"golang.org/x/time/rate"

	"github.com/wsbroker/wsbroker/audit"
	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/policy"
	"github.com/wsbroker/wsbroker/tenant"
)

// SetTenants swaps in a new tenant registry: a rotated token works and a
// removed one stops at the next request, without a restart. Workspaces of
// a tenant that is gone stay, unreachable until it comes back.
func (s *Server) SetTenants(reg *tenant.Registry) {
	s.reg.Store(reg)
	for _, t := range reg.Tenants() {
		s.limitsFor(t) // apply changed rates to the existing limiters
	}
}

// Tenants returns the registry in force.
func (s *Server) Tenants() *tenant.Registry { return s.reg.Load() }

const (
	tenantKey ctxKey = iota + 100
	auditKey
)

// tenantFrom returns the authenticated tenant of a /v1 request.
func tenantFrom(ctx context.Context) *tenant.Tenant {
	t, _ := ctx.Value(tenantKey).(*tenant.Tenant)
	return t
}

// policyOf returns the current policy of the tenant called name; a tenant
// that was removed by a reload gets a policy that denies everything.
func (s *Server) policyOf(name string) *policy.Policy {
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

// reqAudit collects what the handlers learn about a request, for its
// audit record.
type reqAudit struct {
	mu   sync.Mutex
	ev   audit.Event
	body *hashingReader
}

func (ra *reqAudit) set(fn func(ev *audit.Event)) {
	if ra == nil {
		return
	}
	ra.mu.Lock()
	fn(&ra.ev)
	ra.mu.Unlock()
}

func reqAuditFrom(ctx context.Context) *reqAudit {
	ra, _ := ctx.Value(auditKey).(*reqAudit)
	return ra
}

// peerIP is the connection's address: X-Forwarded-For and its kind are
// never read, a client can write anything there.
func peerIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// hashingReader counts and hashes the request body as the handler reads
// it, so the record has a digest of what was sent without keeping it.
type hashingReader struct {
	rc io.ReadCloser
	h  hash.Hash
	n  int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.rc.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashingReader) Close() error { return h.rc.Close() }

// auditRequests writes one record per /v1 request once it is answered,
// authenticated or not.
func (s *Server) auditRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww, ok := w.(middleware.WrapResponseWriter)
		if !ok {
			ww = middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		}
		body := &hashingReader{rc: r.Body, h: sha256.New()}
		r.Body = body
		ra := &reqAudit{body: body, ev: audit.Event{
			AuditID:                  newAuditID(),
			RequestID:                middleware.GetReqID(r.Context()),
			Stage:                    audit.StageResponseComplete,
			SourceIP:                 peerIP(r),
			Verb:                     r.Method,
			RequestReceivedTimestamp: start.UTC(),
		}}
		defer func() {
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			ra.mu.Lock()
			ev := ra.ev
			ra.mu.Unlock()
			ev.Route = routePattern(r)
			if ev.Args == nil {
				ev.Args = &audit.Args{}
			}
			if p := r.URL.Query().Get("path"); p != "" && ev.Args.Path == "" {
				ev.Args.Path = p
			}
			ev.Args.Digest = audit.Digest([]byte(r.Method), []byte(r.URL.Path), []byte(r.URL.RawQuery), body.h.Sum(nil))
			if ev.Decision == "" {
				ev.Decision = "allow"
				if status == http.StatusUnauthorized {
					ev.Decision, ev.Rule, ev.Reason = "deny", "authentication", "no valid bearer token"
				}
			}
			if ev.Result == nil {
				ev.Result = &audit.Result{}
			}
			ev.Result.Status, ev.Result.BytesIn, ev.Result.BytesOut = status, body.n, int64(ww.BytesWritten())
			now := time.Now()
			ev.StageTimestamp, ev.DurationNs = now.UTC(), int64(now.Sub(start))
			s.record(ev)
		}()
		next.ServeHTTP(ww, r.WithContext(context.WithValue(r.Context(), auditKey, ra)))
	})
}

// auditDenial marks the request's record as denied.
func auditDenial(r *http.Request, rule, reason string) {
	reqAuditFrom(r.Context()).set(func(ev *audit.Event) {
		ev.Decision, ev.Rule, ev.Reason = "deny", rule, reason
	})
}

// tenantLimits are one tenant's rate limiter and in-flight counter; they
// outlive reloads so that a reload does not reset anyone's budget.
type tenantLimits struct {
	lim      *rate.Limiter
	mu       sync.Mutex
	inflight int
}

func (s *Server) limitsFor(t *tenant.Tenant) *tenantLimits {
	q := t.Quotas
	r, burst := rate.Inf, 0
	if q.RequestsPerSecond > 0 {
		r = rate.Limit(q.RequestsPerSecond)
		burst = q.Burst
		if burst == 0 {
			burst = max(1, int(math.Ceil(q.RequestsPerSecond)))
		}
	}
	v, loaded := s.limits.LoadOrStore(t.Name, &tenantLimits{lim: rate.NewLimiter(r, burst)})
	tl := v.(*tenantLimits)
	if loaded && (tl.lim.Limit() != r || tl.lim.Burst() != burst) {
		tl.lim.SetLimit(r)
		tl.lim.SetBurst(burst)
	}
	return tl
}

// limit applies the tenant's request rate and concurrency: past either,
// 429 with Retry-After, and only that tenant is held back.
func (s *Server) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantFrom(r.Context())
		tl := s.limitsFor(t)
		if res := tl.lim.Reserve(); !res.OK() || res.Delay() > 0 {
			wait := time.Second
			if res.OK() {
				wait = res.Delay()
				res.Cancel() // not taken: the request is refused
			}
			s.tooMany(w, r, "rate", wait, fmt.Sprintf("tenant %s is over its rate of %g requests per second", t.Name, t.Quotas.RequestsPerSecond))
			return
		}
		if c := t.Quotas.ConcurrentCalls; c > 0 {
			tl.mu.Lock()
			if tl.inflight >= c {
				tl.mu.Unlock()
				s.tooMany(w, r, "concurrency", time.Second, fmt.Sprintf("tenant %s already has %d calls in flight", t.Name, c))
				return
			}
			tl.inflight++
			tl.mu.Unlock()
			defer func() {
				tl.mu.Lock()
				tl.inflight--
				tl.mu.Unlock()
			}()
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) tooMany(w http.ResponseWriter, r *http.Request, rule string, wait time.Duration, reason string) {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	auditDenial(r, rule, reason)
	writeProblem(w, r, s.logger, fmt.Errorf("%w: %s", ErrTooManyRequests, reason))
}

// decide asks the tenant's policy about a raw operation, and its disk
// quota about one that writes or runs a command. On a denial it answers
// 403 `denied` and audits it. It reports whether to go on.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, wk *workspace, c policy.Call) bool {
	c.Root = wk.ws.Root()
	d := s.policyOf(wk.tenant).Decide(c)
	if d.Allowed {
		if len(c.Write) == 0 && !c.HasCommand {
			return true
		}
		err := s.overDisk(wk.tenant)
		if err == nil {
			return true
		}
		auditDenial(r, "quota", err.Error())
		writeProblem(w, r, s.logger, err)
		return false
	}
	auditDenial(r, d.Rule, d.Reason)
	p := ""
	if len(c.Read) > 0 {
		p = c.Read[0]
	} else if len(c.Write) > 0 {
		p = c.Write[0]
	}
	writeProblem(w, r, s.logger, opsapi.E(c.Op, p, opsapi.ErrDenied, errors.New(d.Message())))
	return false
}

// ownerStore remembers which tenant owns each workspace, in a JSON file
// when one is configured, so that ownership survives a restart.
type ownerStore struct {
	mu   sync.Mutex
	path string
	m    map[string]string
}

func loadOwners(path string) (*ownerStore, error) {
	o := &ownerStore{path: path, m: map[string]string{}}
	if path == "" {
		return o, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return o, nil
	case err != nil:
		return nil, fmt.Errorf("broker: owners file: %w", err)
	}
	if err := json.Unmarshal(b, &o.m); err != nil {
		return nil, fmt.Errorf("broker: owners file %s: %w", path, err)
	}
	return o, nil
}

func (o *ownerStore) get(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.m[id]
	return t, ok
}

// set records (or with tenant "" forgets) an owner and saves the file
// atomically.
func (o *ownerStore) set(id, tenantName string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if tenantName == "" {
		delete(o.m, id)
	} else {
		o.m[id] = tenantName
	}
	if o.path == "" {
		return nil
	}
	b, _ := json.MarshalIndent(o.m, "", "  ")
	if err := os.MkdirAll(filepath.Dir(o.path), 0o700); err != nil {
		return fmt.Errorf("owners file: %w", err)
	}
	tmp := o.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("owners file: %w", err)
	}
	if err := os.Rename(tmp, o.path); err != nil {
		return fmt.Errorf("owners file: %w", err)
	}
	return nil
}

// diskUsage measures a workspace whose root is a host directory (local
// backend) and caches the figure briefly: a quota check must not walk a
// large tree on every write.
type diskUsage struct {
	mu    sync.Mutex
	cache map[string]diskFigure
}

type diskFigure struct {
	bytes int64
	at    time.Time
}

const diskCacheTTL = 2 * time.Second

func (d *diskUsage) of(root string) int64 {
	d.mu.Lock()
	f, ok := d.cache[root]
	d.mu.Unlock()
	if ok && time.Since(f.at) < diskCacheTTL {
		return f.bytes
	}
	var total int64
	_ = filepath.WalkDir(root, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return nil
	})
	d.mu.Lock()
	if d.cache == nil {
		d.cache = map[string]diskFigure{}
	}
	d.cache[root] = diskFigure{bytes: total, at: time.Now()}
	d.mu.Unlock()
	return total
}

// measurable reports whether the broker can measure wk's disk use: its
// root is a directory on this host.
func measurable(wk *workspace) bool { return wk.backend == "local" }

// overDisk returns a denial when the tenant's measurable workspaces
// together hold its DiskBytes quota or more. It is checked before calls
// that write; a single call can still overshoot by what it writes.
func (s *Server) overDisk(tenantName string) error {
	t := s.reg.Load().Lookup(tenantName)
	if t == nil || t.Quotas.DiskBytes <= 0 {
		return nil
	}
	var used int64
	s.mu.RLock()
	var roots []string
	for _, w := range s.workspaces {
		if w.tenant == tenantName && measurable(w) {
			roots = append(roots, w.ws.Root())
		}
	}
	s.mu.RUnlock()
	for _, root := range roots {
		used += s.disk.of(root)
	}
	if used >= t.Quotas.DiskBytes {
		return opsapi.E("write", "", opsapi.ErrDenied,
			fmt.Errorf("disk quota exceeded: tenant %s uses %d of %d bytes", tenantName, used, t.Quotas.DiskBytes))
	}
	return nil
}

// record writes an audit event and counts a denial.
func (s *Server) record(ev audit.Event) {
	if ev.Decision == "deny" {
		s.metrics.denials.WithLabelValues(ev.Rule).Inc()
	}
	s.audit.Write(ev)
}

// newAuditID returns 128 random bits as hex: the client's X-Request-Id is
// its own to choose, an audit id is not.
func newAuditID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
