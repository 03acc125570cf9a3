package workspaces

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wsbroker/wsbroker/tenant"
)

// LimitError is a call refused because its tenant is over its request
// rate or its concurrent calls. The HTTP layer answers 429 with
// Retry-After; MCP an error result.
type LimitError struct {
	// Rule is "rate" or "concurrency", as audited.
	Rule string
	// Reason says which limit, for the caller.
	Reason string
	// RetryAfter is how long to wait before trying again.
	RetryAfter time.Duration
}

func (e *LimitError) Error() string { return e.Reason }

// tenantLimits are one tenant's rate limiter and in-flight counter; they
// outlive reloads so that a reload does not reset anyone's budget.
type tenantLimits struct {
	lim      *rate.Limiter
	mu       sync.Mutex
	inflight int
}

func (s *Service) limitsFor(t *tenant.Tenant) *tenantLimits {
	q := t.Quotas
	r, burst := rate.Inf, 0
	if q.RequestsPerSecond > 0 {
		r = rate.Limit(q.RequestsPerSecond)
		burst = q.Burst
		if burst == 0 {
			burst = max(1, int(math.Ceil(q.RequestsPerSecond)))
		}
	}
	v, loaded := s.limits.LoadOrStore(t.Name, &tenantLimits{lim: rate.NewLimiter(r, burst)})
	tl := v.(*tenantLimits)
	if loaded && (tl.lim.Limit() != r || tl.lim.Burst() != burst) {
		tl.lim.SetLimit(r)
		tl.lim.SetBurst(burst)
	}
	return tl
}

// Enter applies the tenant's request rate and concurrency to one call:
// past either it returns a *LimitError, and only that tenant is held
// back. Otherwise the caller calls leave when the call is done.
func (s *Service) Enter(t *tenant.Tenant) (leave func(), err error) {
	tl := s.limitsFor(t)
	if res := tl.lim.Reserve(); !res.OK() || res.Delay() > 0 {
		wait := time.Second
		if res.OK() {
			wait = res.Delay()
			res.Cancel() // not taken: the call is refused
		}
		return nil, &LimitError{Rule: "rate", RetryAfter: wait,
			Reason: fmt.Sprintf("tenant %s is over its rate of %g requests per second", t.Name, t.Quotas.RequestsPerSecond)}
	}
	c := t.Quotas.ConcurrentCalls
	if c <= 0 {
		return func() {}, nil
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.inflight >= c {
		return nil, &LimitError{Rule: "concurrency", RetryAfter: time.Second,
			Reason: fmt.Sprintf("tenant %s already has %d calls in flight", t.Name, c)}
	}
	tl.inflight++
	return func() {
		tl.mu.Lock()
		tl.inflight--
		tl.mu.Unlock()
	}, nil
}

// EnterBatch takes, without waiting, up to n more of the tenant's call
// slots for the other calls of a batch (the batch request holds one
// already): it returns how many it got and a func that gives them back.
// The batch then runs at most 1+extra calls at once, so its calls count
// against concurrentCalls like separate requests.
func (s *Service) EnterBatch(t *tenant.Tenant, n int) (extra int, leave func()) {
	c := t.Quotas.ConcurrentCalls
	if c <= 0 || n <= 0 {
		return max(n, 0), func() {}
	}
	tl := s.limitsFor(t)
	tl.mu.Lock()
	extra = min(n, max(0, c-tl.inflight))
	tl.inflight += extra
	tl.mu.Unlock()
	return extra, func() {
		tl.mu.Lock()
		tl.inflight -= extra
		tl.mu.Unlock()
	}
}

// ChargeCall charges one more call of a batch against the tenant's
// request rate, without waiting: over it, a *LimitError (rule "rate").
func (s *Service) ChargeCall(t *tenant.Tenant) error {
	tl := s.limitsFor(t)
	res := tl.lim.Reserve()
	if res.OK() && res.Delay() == 0 {
		return nil
	}
	wait := time.Second
	if res.OK() {
		wait = res.Delay()
		res.Cancel()
	}
	return &LimitError{Rule: "rate", RetryAfter: wait,
		Reason: fmt.Sprintf("tenant %s is over its rate of %g requests per second", t.Name, t.Quotas.RequestsPerSecond)}
}
