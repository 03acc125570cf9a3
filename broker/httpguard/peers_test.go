package httpguard

import (
	"fmt"
	"testing"
	"time"
)

// TestPeerLimiterIsBounded: the peer table never passes its size; peers
// beyond it share one overflow budget, so fresh addresses buy nothing;
// once the old peers' budgets have refilled they make room again.
func TestPeerLimiterIsBounded(t *testing.T) {
	p := NewPeerLimiter(1, 2, 4)
	now := time.Unix(1000, 0)
	for i := range 4 {
		if ok, _ := p.Allow(fmt.Sprint("10.0.0.", i), now); !ok {
			t.Fatalf("peer %d refused its first request", i)
		}
	}
	allowed := 0
	for i := range 100 {
		if ok, _ := p.Allow(fmt.Sprint("10.0.1.", i), now); ok {
			allowed++
		}
	}
	if len(p.peers) != 4 || allowed != 2 {
		t.Fatalf("%d peers tracked, %d of 100 new peers allowed; want 4 and the overflow burst of 2", len(p.peers), allowed)
	}
	if ok, wait := p.Allow("10.0.0.0", now); !ok || wait != 0 {
		t.Fatal("a tracked peer lost its own budget to the newcomers")
	}
	later := now.Add(10 * time.Second) // every budget has refilled
	if ok, _ := p.Allow("10.0.2.1", later); !ok || p.peers["10.0.2.1"] == nil || len(p.peers) > 4 {
		t.Fatalf("after the refill a new peer is not tracked: %d peers", len(p.peers))
	}
}
