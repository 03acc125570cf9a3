package kubernetes

import "time"

// SetPoolTimings shortens the pools' lease timings for a test; the
// returned func restores them.
func SetPoolTimings(renew, ttl, sweep time.Duration) (restore func()) {
	r, l, s := leaseRenew, leaseTTL, sweepEvery
	leaseRenew, leaseTTL, sweepEvery = renew, ttl, sweep
	return func() { leaseRenew, leaseTTL, sweepEvery = r, l, s }
}
