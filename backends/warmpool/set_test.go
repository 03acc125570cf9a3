package warmpool_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsbroker/wsbroker/backends/warmpool"
)

// TestSet: the filler fills, a dead member is removed on Take, a member
// given back to a full pool is removed, background work stops at Close,
// and Close removes every ready member.
func TestSet(t *testing.T) {
	var mu sync.Mutex
	removed := map[int]bool{}
	dead := map[int]bool{}
	s := &warmpool.Set[int]{
		Alive:  func(m int) bool { mu.Lock(); defer mu.Unlock(); return !dead[m] },
		Remove: func(m int) { mu.Lock(); removed[m] = true; mu.Unlock() },
		Name:   strconv.Itoa,
		Logger: slog.New(slog.DiscardHandler),
	}
	p := s.Add("small", 2)
	var made atomic.Int64
	s.Fill(p, func(context.Context) (int, error) { return int(made.Add(1)), nil }, time.Millisecond)
	var workEnded atomic.Bool
	s.Go(func(ctx context.Context) { <-ctx.Done(); workEnded.Store(true) })
	waitReady := func(n int) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); p.Ready() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("ready %d, want %d", p.Ready(), n)
			}
		}
	}
	waitReady(2)
	if st := s.Status(); len(st) != 1 || st[0].Name != "small" || st[0].Size != 2 || st[0].Ready != 2 {
		t.Fatalf("Status = %+v", st)
	}
	mu.Lock()
	dead[1] = true
	mu.Unlock()
	m, ok := s.Take(p)
	if !ok || m != 2 {
		t.Fatalf("Take = %d %v, want 2 (1 is dead)", m, ok)
	}
	waitReady(2) // 3 and 4
	s.GiveBack(p, m)
	s.Close()
	if !workEnded.Load() {
		t.Error("background work still running after Close")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range []int{1, 2, 3, 4} {
		if !removed[m] {
			t.Errorf("member %d not removed (removed: %v)", m, removed)
		}
	}
	if p.Ready() != 0 {
		t.Errorf("%d members still ready after Close", p.Ready())
	}
}
