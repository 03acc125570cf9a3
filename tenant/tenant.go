package tenant

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/wsbroker/wsbroker/policy"
)

// DefaultName is the tenant a single-token broker serves.
const DefaultName = "default"

// DefaultWorkspaces is the workspace quota of a tenant that sets none:
// without one a client could create workspaces until the disk, the
// inode table or the next start's rediscovery gives out.
const DefaultWorkspaces = 256

// Quotas bound what a tenant may hold and do; zero means no limit,
// except Workspaces.
type Quotas struct {
	// Workspaces is the most workspaces the tenant may hold at once:
	// 0 means DefaultWorkspaces, -1 no limit.
	Workspaces int `yaml:"workspaces,omitempty"`
	// ConcurrentCalls is the most requests of the tenant in flight at once.
	ConcurrentCalls int `yaml:"concurrentCalls,omitempty"`
	// RequestsPerSecond is the sustained request rate; Burst (default
	// max(1, ceil(rate))) the requests allowed at once above it.
	RequestsPerSecond float64 `yaml:"requestsPerSecond,omitempty"`
	Burst             int     `yaml:"burst,omitempty"`
	// DiskBytes bounds the total size of the tenant's workspaces where the
	// broker can measure it (workspaces whose root is a host directory:
	// the local backend).
	DiskBytes int64 `yaml:"diskBytes,omitempty"`
}

// Config is one tenant as written in the broker's YAML configuration.
type Config struct {
	Name string `yaml:"name"`
	// TokenHashes are "sha256:<64 hex>" (or the bare hex) of the tenant's
	// bearer tokens; several allow rotation with overlap.
	TokenHashes []string `yaml:"tokenHashes"`
	// Admin tenants read every tenant's audit records.
	Admin bool `yaml:"admin,omitempty"`
	// Backends the tenant may create workspaces on; empty means all.
	Backends []string `yaml:"backends,omitempty"`
	// Images (globs, as path.Match) the tenant may name when creating a
	// workspace; empty means any the backend allows. A create that names
	// no image gets the backend's default, which the host chose.
	Images []string `yaml:"images,omitempty"`
	// Policy is the policy file attached to the tenant; empty means none.
	Policy string `yaml:"policy,omitempty"`
	Quotas Quotas `yaml:"quotas,omitempty"`
}

// Tenant is a validated tenant.
type Tenant struct {
	Name     string
	Admin    bool
	Backends []string
	Images   []string
	Quotas   Quotas
	// Policy is the tenant's policy; nil allows everything.
	Policy *policy.Policy
	hashes [][sha256.Size]byte
}

// AllowsBackend reports whether the tenant may use backend name.
func (t *Tenant) AllowsBackend(name string) bool {
	return len(t.Backends) == 0 || slices.Contains(t.Backends, name)
}

// AllowsImage reports whether the tenant may name image.
func (t *Tenant) AllowsImage(image string) bool {
	if len(t.Images) == 0 || image == "" {
		return true
	}
	for _, g := range t.Images {
		if ok, _ := path.Match(g, image); ok {
			return true
		}
	}
	return false
}

// HashToken returns the form a token is configured in: "sha256:<hex>".
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseHash reads "sha256:<hex>" or the bare 64 hex digits.
func ParseHash(s string) ([sha256.Size]byte, error) {
	var out [sha256.Size]byte
	h := strings.TrimPrefix(strings.TrimSpace(s), "sha256:")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != sha256.Size {
		return out, errors.New("want sha256:<64 hex digits> (see `broker token hash`)")
	}
	copy(out[:], b)
	return out, nil
}

// New validates c; pol is its loaded policy (nil for none), compiled here
// if it was built in code.
func New(c Config, pol *policy.Policy) (*Tenant, error) {
	if c.Name == "" {
		return nil, errors.New("tenant: name is required")
	}
	if pol != nil {
		if err := pol.Compile(); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", c.Name, err)
		}
	}
	t := &Tenant{Name: c.Name, Admin: c.Admin, Backends: c.Backends, Images: c.Images, Quotas: c.Quotas, Policy: pol}
	if len(c.TokenHashes) == 0 {
		return nil, fmt.Errorf("tenant %s: at least one token hash is required", c.Name)
	}
	for i, h := range c.TokenHashes {
		sum, err := ParseHash(h)
		if err != nil {
			return nil, fmt.Errorf("tenant %s: tokenHashes[%d]: %w", c.Name, i, err)
		}
		t.hashes = append(t.hashes, sum)
	}
	for _, g := range c.Images {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("tenant %s: image glob %q: %w", c.Name, g, err)
		}
	}
	q := c.Quotas
	if q.Workspaces < -1 || q.ConcurrentCalls < 0 || q.RequestsPerSecond < 0 || q.Burst < 0 || q.DiskBytes < 0 {
		return nil, fmt.Errorf("tenant %s: quotas must not be negative (workspaces: -1 is no limit)", c.Name)
	}
	return t, nil
}

// WorkspaceLimit is the most workspaces the tenant may hold at once, its
// quota or DefaultWorkspaces; 0 means no limit.
func (q Quotas) WorkspaceLimit() int {
	switch {
	case q.Workspaces < 0:
		return 0
	case q.Workspaces == 0:
		return DefaultWorkspaces
	}
	return q.Workspaces
}

// WithTokens is a tenant built in code from plain tokens (the
// single-token setup and tests).
func WithTokens(name string, admin bool, tokens ...string) *Tenant {
	t := &Tenant{Name: name, Admin: admin}
	for _, tok := range tokens {
		t.hashes = append(t.hashes, sha256.Sum256([]byte(tok)))
	}
	return t
}

// Registry is an immutable set of tenants.
type Registry struct {
	tenants []*Tenant
	byName  map[string]*Tenant
}

// NewRegistry checks that names are unique and that no token hash is
// shared between tenants.
func NewRegistry(ts ...*Tenant) (*Registry, error) {
	if len(ts) == 0 {
		return nil, errors.New("tenant: at least one tenant is required")
	}
	r := &Registry{byName: map[string]*Tenant{}}
	seen := map[[sha256.Size]byte]string{}
	for _, t := range ts {
		if _, dup := r.byName[t.Name]; dup {
			return nil, fmt.Errorf("tenant %s: defined twice", t.Name)
		}
		if len(t.hashes) == 0 {
			return nil, fmt.Errorf("tenant %s: no token", t.Name)
		}
		for _, h := range t.hashes {
			if other, dup := seen[h]; dup {
				return nil, fmt.Errorf("tenant %s: a token hash is also %s's", t.Name, other)
			}
			seen[h] = t.Name
		}
		r.byName[t.Name] = t
		r.tenants = append(r.tenants, t)
	}
	return r, nil
}

// Authenticate returns the tenant token belongs to, or nil. Every hash of
// every tenant is compared, in constant time, so neither which tenant nor
// whether any matched leaks through timing.
func (r *Registry) Authenticate(token string) *Tenant {
	sum := sha256.Sum256([]byte(token))
	var found *Tenant
	for _, t := range r.tenants {
		for i := range t.hashes {
			if subtle.ConstantTimeCompare(sum[:], t.hashes[i][:]) == 1 {
				found = t
			}
		}
	}
	return found
}

// Lookup returns the tenant called name, or nil.
func (r *Registry) Lookup(name string) *Tenant { return r.byName[name] }

// Tenants returns the tenants in configuration order.
func (r *Registry) Tenants() []*Tenant { return slices.Clone(r.tenants) }

// First returns the first tenant: the owner of workspaces whose owner is
// not recorded (adopted after a restart without an owners file).
func (r *Registry) First() *Tenant { return r.tenants[0] }
