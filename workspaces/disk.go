package workspaces

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/tenant"
)

// diskCacheTTL is how long a workspace's measured disk use stands: a
// quota check must not walk a large tree on every write.
const diskCacheTTL = 2 * time.Second

// DefaultSpillTotalBytes bounds the full-output files of every workspace
// together (Config.SpillTotalBytes) on the broker's host.
const DefaultSpillTotalBytes = 1 << 30

// diskCache keeps each measurable workspace's last figure.
type diskCache struct {
	mu    sync.Mutex
	cache map[string]diskFigure // by workspace id
}

type diskFigure struct {
	bytes int64
	at    time.Time
}

func (d *diskCache) of(ctx context.Context, id string, m opsapi.DiskMeasurer) int64 {
	d.mu.Lock()
	f, ok := d.cache[id]
	d.mu.Unlock()
	if ok && time.Since(f.at) < diskCacheTTL {
		return f.bytes
	}
	total, err := m.DiskUsage(ctx)
	if err != nil {
		return total // a walk cut short is not a figure to keep
	}
	d.mu.Lock()
	if d.cache == nil {
		d.cache = map[string]diskFigure{}
	}
	d.cache[id] = diskFigure{bytes: total, at: time.Now()}
	d.mu.Unlock()
	return total
}

// diskHeld is what one workspace holds of its tenant's disk quota: the
// size of its own filesystem when it has one (the kernel keeps it within),
// else what its files measure (best effort: opsapi.DiskMeasurer), else
// nothing; and, on the broker's host, its full-output files.
func (s *Service) diskHeld(ctx context.Context, w *Workspace) (held int64, limited bool) {
	spilled := w.toolbox.SpillBytes()
	if l, ok := opsapi.As[opsapi.DiskLimiter](w.ws); ok {
		if d, err := l.Disk(); err == nil && d.LimitBytes > 0 {
			return d.LimitBytes + spilled, true
		}
	}
	if m, ok := opsapi.As[opsapi.DiskMeasurer](w.ws); ok {
		return s.disk.of(ctx, w.id, m) + spilled, false
	}
	return spilled, false
}

// tenantDisk adds up what the tenant's workspaces hold of its disk quota
// (reserveDisk adds what creates under way have reserved).
func (s *Service) tenantDisk(ctx context.Context, tenantName string) int64 {
	var ws []*Workspace
	s.mu.RLock()
	for _, w := range s.workspaces {
		if w.tenant == tenantName {
			ws = append(ws, w)
		}
	}
	s.mu.RUnlock()
	var total int64
	for _, w := range ws {
		held, _ := s.diskHeld(ctx, w)
		total += held
	}
	return total
}

// overDisk returns a denial when w has no filesystem of its own and the
// tenant's workspaces together hold its DiskBytes quota or more. It is
// checked before calls that write; a single call can still overshoot by
// what it writes. A workspace with its own filesystem is never denied:
// the kernel keeps it within its size, the sizes were admitted against
// the quota at create, and a full one must still be able to run rm.
func (s *Service) overDisk(ctx context.Context, w *Workspace) error {
	t := s.reg.Load().Lookup(w.tenant)
	if t == nil || t.Quotas.DiskBytes <= 0 {
		return nil
	}
	if _, limited := s.diskHeld(ctx, w); limited {
		return nil
	}
	if used := s.tenantDisk(ctx, w.tenant); used >= t.Quotas.DiskBytes {
		return opsapi.E("write", "", opsapi.ErrDenied,
			fmt.Errorf("disk quota exceeded: tenant %s uses %d of %d bytes", w.tenant, used, t.Quotas.DiskBytes))
	}
	return nil
}

// reserveDisk admits a create against the tenant's disk quota: the size
// the backend will give the workspace's own filesystem (opsapi.DiskSizer)
// must fit beside what the tenant's workspaces hold and other creates
// reserved; a workspace without one is admitted while the tenant is under
// its quota. A denial says what size would fit: a tenant whose quota is
// below the backend's default size asks for less in each create. The
// returned func gives the reservation back (the workspace, if made, holds
// its size by then).
func (s *Service) reserveDisk(ctx context.Context, t *tenant.Tenant, b opsapi.Backend, options json.RawMessage) (func(), error) {
	q := t.Quotas.DiskBytes
	if q <= 0 {
		return func() {}, nil
	}
	var size int64
	if ds, ok := b.(opsapi.DiskSizer); ok {
		size = ds.DiskLimit(options)
	}
	held := s.tenantDisk(ctx, t.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	held += s.diskCreating[t.Name]
	if held+size > q || size == 0 && held >= q {
		// The size may be the backend's default (1 GiB under broker
		// serve) rather than one the create asked for: say what fits.
		hint := ""
		if size > 0 && held < q {
			hint = fmt.Sprintf(" (a create may ask for a smaller disk in its options' limits: at most %d bytes)", q-held)
		}
		return nil, opsapi.E("create", "", opsapi.ErrDenied,
			fmt.Errorf("disk quota exceeded: tenant %s holds %d of %d bytes; a workspace of %d more does not fit%s", t.Name, held, q, size, hint))
	}
	s.diskCreating[t.Name] += size
	return func() {
		s.mu.Lock()
		s.diskCreating[t.Name] -= size
		s.mu.Unlock()
	}, nil
}
