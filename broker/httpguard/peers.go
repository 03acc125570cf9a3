package httpguard

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// PeerLimiter rate-limits requests per peer address: the broker holds
// to it the requests that fail authentication, so that a flood of bad
// tokens costs it (and its audit trail) a bounded amount.
//
// The map of peers is bounded: when it is full, peers whose budget has
// refilled are dropped (they start afresh, as they would have been), and
// if none has, every new peer shares one overflow budget, so spraying
// source addresses buys nothing more than one peer has.
type PeerLimiter struct {
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

// NewPeerLimiter allows each peer perSecond requests, burst at once,
// tracking at most maxPeers peers.
func NewPeerLimiter(perSecond float64, burst, maxPeers int) *PeerLimiter {
	return &PeerLimiter{
		limit: rate.Limit(perSecond), burst: burst, max: maxPeers,
		peers:    make(map[string]*peerBudget),
		overflow: rate.NewLimiter(rate.Limit(perSecond), burst),
	}
}

// Allow takes one unauthenticated request of peer from its budget: false
// and the wait before the next one when there is none left.
func (p *PeerLimiter) Allow(peer string, now time.Time) (bool, time.Duration) {
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
func (p *PeerLimiter) sweep(now time.Time) {
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
