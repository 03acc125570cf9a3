package remote

import (
	"context"
	"log/slog"
	"time"
)

// Expirable is a table's workspace that can expire: a backend's type
// embedding *Workspace is one.
type Expirable interface {
	Member
	IdleFor() time.Duration
	DestroyWith(ctx context.Context, reason string) error
	Logger() *slog.Logger
}

// Reap destroys the workspaces of t that no call has used for longer
// than ttl ("expired"), looking every quarter of ttl (10 ms to a
// minute), until stop is called; stop returns once the reaper has ended.
func Reap[W Expirable](t *Table[W], ttl time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(min(max(ttl/4, 10*time.Millisecond), time.Minute))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, w := range t.All() {
				if w.IdleFor() <= ttl {
					continue
				}
				dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
				if err := w.DestroyWith(dctx, "expired"); err != nil {
					w.Logger().Warn("expiring an idle workspace failed", "err", err)
				}
				dcancel()
			}
		}
	}()
	return func() { cancel(); <-done }
}
