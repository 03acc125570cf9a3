package workspaces

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// diskCacheTTL is how long a workspace's measured disk use stands: a
// quota check must not walk a large tree on every write.
const diskCacheTTL = 2 * time.Second

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

// overDisk returns a denial when the tenant's measurable workspaces
// (opsapi.DiskMeasurer) together hold its DiskBytes quota or more. It is
// checked before calls that write; a single call can still overshoot by
// what it writes.
func (s *Service) overDisk(ctx context.Context, tenantName string) error {
	t := s.reg.Load().Lookup(tenantName)
	if t == nil || t.Quotas.DiskBytes <= 0 {
		return nil
	}
	type measured struct {
		id string
		m  opsapi.DiskMeasurer
	}
	var ms []measured
	s.mu.RLock()
	for _, w := range s.workspaces {
		if w.tenant != tenantName {
			continue
		}
		if m, ok := opsapi.As[opsapi.DiskMeasurer](w.ws); ok {
			ms = append(ms, measured{w.id, m})
		}
	}
	s.mu.RUnlock()
	var used int64
	for _, x := range ms {
		used += s.disk.of(ctx, x.id, x.m)
	}
	if used >= t.Quotas.DiskBytes {
		return opsapi.E("write", "", opsapi.ErrDenied,
			fmt.Errorf("disk quota exceeded: tenant %s uses %d of %d bytes", tenantName, used, t.Quotas.DiskBytes))
	}
	return nil
}
