package broker

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wsbroker/wsbroker/audit"
)

// The requests that fail authentication are held, per peer address, to
// Config.UnauthPerSecond (httpguard.PeerLimiter), so that a flood of bad
// tokens costs the broker (and its audit trail) a bounded amount: within
// the limit a 401 is answered and audited; past it a 429 is answered and
// nothing is written.

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
