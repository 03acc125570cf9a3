package warmpool

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/wsbroker/wsbroker/opsapi"
)

// Set is a backend's warm pools and the goroutines that keep them: the
// fillers, any other background work, and the members removed in the
// background. Set Alive, Remove, Name and Logger before the first Add.
type Set[M any] struct {
	// Alive says whether a ready member can still be handed out (its
	// agent connected).
	Alive func(M) bool
	// Remove removes a member for good.
	Remove func(M)
	// Name names a member in logs.
	Name func(M) string
	// Logger receives the pools' events.
	Logger *slog.Logger

	names    []string
	pools    []*Pool[M]
	ctx      context.Context
	cancel   context.CancelFunc
	workers  sync.WaitGroup
	removals sync.WaitGroup
}

// Add makes a pool of size members called name, kept by the set.
func (s *Set[M]) Add(name string, size int) *Pool[M] {
	p := New[M](size)
	s.names = append(s.names, name)
	s.pools = append(s.pools, p)
	return p
}

// Go runs work in the background with a context that ends at Close.
func (s *Set[M]) Go(work func(ctx context.Context)) {
	if s.cancel == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	s.workers.Go(func() { work(s.ctx) })
}

// Fill keeps p full in the background (Pool.Fill) until Close.
func (s *Set[M]) Fill(p *Pool[M], make func(context.Context) (M, error), retry time.Duration) {
	logger := s.Logger.With("pool", s.name(p))
	s.Go(func(ctx context.Context) { p.Fill(ctx, make, s.Remove, retry, logger) })
}

func (s *Set[M]) name(p *Pool[M]) string {
	for i, q := range s.pools {
		if q == p {
			return s.names[i]
		}
	}
	return ""
}

// Take is a ready member of p that is still alive, or false when none is
// ready. Members found dead are removed in the background.
func (s *Set[M]) Take(p *Pool[M]) (M, bool) {
	return p.Take(s.Alive, func(m M) {
		s.Logger.Warn("a pool member lost its agent; removing it", "pool", s.name(p), "member", s.Name(m))
		s.RemoveLater(m)
	})
}

// GiveBack returns an untouched member to p, or removes it when the
// filler has made p full again meanwhile.
func (s *Set[M]) GiveBack(p *Pool[M], m M) {
	if !p.Put(m) {
		s.RemoveLater(m)
	}
}

// RemoveLater removes m in the background; Close waits for it.
func (s *Set[M]) RemoveLater(m M) {
	s.removals.Go(func() { s.Remove(m) })
}

// Close stops the background work and removes every ready member: no
// one else could use them.
func (s *Set[M]) Close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.workers.Wait()
	for _, p := range s.pools {
		for m, ok := s.Take(p); ok; m, ok = s.Take(p) {
			s.RemoveLater(m)
		}
	}
	s.removals.Wait()
}

// Status says how full each pool is (opsapi.PoolReporter).
func (s *Set[M]) Status() []opsapi.PoolStatus {
	out := make([]opsapi.PoolStatus, 0, len(s.pools))
	for i, p := range s.pools {
		out = append(out, p.Status(s.names[i]))
	}
	return out
}
