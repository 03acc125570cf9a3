package broker

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// peerLimiter rate-limits the requests that fail authentication, per
// peer address, so that a flood of bad tokens costs the broker (and its
// audit trail) a bounded amount: within the limit a 401 is answered and
// audited; past it a 429 is answered and nothing is written.
//
// The map of peers is bounded: when it is full, peers whose budget has
// refilled are dropped (they start afresh, as they would have been), and
// if none has, every new peer shares one overflow budget, so spraying
// source addresses buys nothing more than one peer has.
type peerLimiter struct {
	limit rate.Limit
	burst int
	max   int

	mu        sync.Mutex
	peers     map[string]*peerBudget
	overflow  *rate.Limiter
	lastSweep time.Time
}

type peerBudget struct {
	lim  *rate.Limiter
	seen time.Time
}

func newPeerLimiter(perSecond float64, burst, maxPeers int) *peerLimiter {
	return &peerLimiter{
		limit: rate.Limit(perSecond), burst: burst, max: maxPeers,
		peers:    make(map[string]*peerBudget),
		overflow: rate.NewLimiter(rate.Limit(perSecond), burst),
	}
}

// allow takes one unauthenticated request of peer from its budget: false
// and the wait before the next one when there is none left.
func (p *peerLimiter) allow(peer string, now time.Time) (bool, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.peers[peer]
	if !ok && len(p.peers) >= p.max {
		p.sweep(now)
	}
	var lim *rate.Limiter
	switch {
	case ok:
		lim = b.lim
	case len(p.peers) < p.max:
		b = &peerBudget{lim: rate.NewLimiter(p.limit, p.burst)}
		p.peers[peer] = b
		lim = b.lim
	default:
		lim = p.overflow
	}
	if b != nil {
		b.seen = now
	}
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops the peers whose budget is full again, at most once a
// second (so a full map of active peers costs one pass a second).
func (p *peerLimiter) sweep(now time.Time) {
	if now.Sub(p.lastSweep) < time.Second {
		return
	}
	p.lastSweep = now
	refill := time.Duration(float64(p.burst) / float64(p.limit) * float64(time.Second))
	for k, b := range p.peers {
		if now.Sub(b.seen) >= refill {
			delete(p.peers, k)
		}
	}
}
