package broker

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wsbroker/wsbroker/audit"
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

// unauthTrail bounds, over all peers, what requests answered before
// authentication (a 401, a 429 past the peer's budget, a 503 while the
// audit refuses calls) write to the audit: within a global budget each
// 401 and 503 is a record of its own; past it, and every 429, each is
// only counted, and one StageSummary record with the counts is written
// every period after the first one counted. Spraying source addresses
// therefore buys a flood of 401s but a bounded trail. The records go to
// their own log (Config.UnauthAudit), so that rotation and retention of
// that log never delete tenants' records.
type unauthTrail struct {
	budget *rate.Limiter
	every  time.Duration
	log    *audit.Log
	denied func(rule string)
	logger *slog.Logger

	mu      sync.Mutex
	counted int64     // requests counted since since
	limited int64     // of them, answered 429 past their peer's budget
	refused int64     // of them, answered 503: the audit refused calls
	since   time.Time // the first one counted
	timer   *time.Timer
	stopped bool
}

func newUnauthTrail(cfg Config, denied func(string), logger *slog.Logger) *unauthTrail {
	log := cfg.UnauthAudit
	if log == nil {
		log = cfg.Audit
	}
	return &unauthTrail{budget: rate.NewLimiter(rate.Limit(cfg.UnauthAuditPerSecond), cfg.UnauthAuditBurst),
		every: cfg.UnauthSummaryEvery, log: log, denied: denied, logger: logger}
}

// admit takes one record from the global budget: false when the request
// is only to be counted (see count).
func (u *unauthTrail) admit(now time.Time) bool { return u.budget.AllowN(now, 1) }

// write records one request that failed authentication.
func (u *unauthTrail) write(ev audit.Event) {
	u.denied(ev.Rule)
	_ = u.log.Write(ev) // a failed write is logged by the log
}

// How a request counted, not recorded by itself, was answered.
const (
	countedOverBudget = iota // 401, past the global budget
	countedTooMany           // 429, past its peer's budget
	countedRefused           // 503 before authentication: the audit refused calls
)

// count counts one request not recorded by itself, answered as how says.
// The first one counted arms the summary.
func (u *unauthTrail) count(now time.Time, how int) {
	rule := "authentication"
	if how == countedRefused {
		rule = "audit"
	}
	u.denied(rule)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.counted == 0 {
		u.since = now
		if !u.stopped {
			u.timer = time.AfterFunc(u.every, u.flush)
		}
	}
	u.counted++
	switch how {
	case countedTooMany:
		u.limited++
	case countedRefused:
		u.refused++
	}
}

// flush writes the summary of what was counted, if anything was.
func (u *unauthTrail) flush() {
	u.mu.Lock()
	n, limited, refused, since := u.counted, u.limited, u.refused, u.since
	u.counted, u.limited, u.refused, u.timer = 0, 0, 0, nil
	u.mu.Unlock()
	if n == 0 {
		return
	}
	now := time.Now().UTC()
	u.logger.Warn("unauthenticated requests past the audit's budget of them, counted",
		"count", n, "answered429", limited, "answered503", refused)
	_ = u.log.Write(audit.Event{
		AuditID: newAuditID(), Stage: audit.StageSummary, Decision: "deny", Rule: "unauthenticated",
		Reason: fmt.Sprintf("%d requests answered before authentication were counted, not recorded one by one "+
			"(past the audit's budget of them): %d answered 401 without a valid bearer token, %d 429 past "+
			"their peer's budget, %d 503 while the audit refused calls", n, n-limited-refused, limited, refused),
		Count: n, RequestReceivedTimestamp: since.UTC(), StageTimestamp: now, DurationNs: int64(now.Sub(since)),
	})
}

// stop writes the pending summary now; nothing is counted after it.
func (u *unauthTrail) stop() {
	u.mu.Lock()
	u.stopped = true
	if u.timer != nil {
		u.timer.Stop()
	}
	u.mu.Unlock()
	u.flush()
}
