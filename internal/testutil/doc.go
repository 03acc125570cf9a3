// Package testutil holds the helpers every test uses: loggers that write to
// testing.T, and the Require* checks that skip a test whose dependency is
// missing, with the reason, except under CI where a skip would hide an
// untested backend and is a failure instead.
//
// # Skips
//
// A test that needs Docker, sshd, root or an external program calls the
// matching Require function first. Locally it skips with the reason; when
// CI=true (or BROKER_TEST_DISALLOW_SKIP is set) it fails.
package testutil
