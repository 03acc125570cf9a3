// Package sshtest starts a real OpenSSH server for tests.
//
// # Overview
//
// Start runs Debian's /usr/sbin/sshd in the foreground (`sshd -D -e -f
// cfg`) on a free 127.0.0.1 port, with a host key and a user key generated
// for the test, an authorized_keys file and a known_hosts file written
// beside them, and stops it when the test ends. Logins go to a dedicated
// account, wsbtest, with /bin/bash as its shell and no start-up files:
// root's shell start-up on these machines costs 135 ms per session, and a
// test account must not carry a developer's dotfiles either.
//
// It needs root (to run sshd and create the account) and sshd itself; it
// skips without them, and fails under CI (see internal/testutil).
//
// # Connection loss
//
// Server.Kill ends the listener and every sshd process serving a
// connection with SIGKILL, as a crash or a dropped network would, while
// the account's own processes keep running; Server.Restart brings the
// server back on the same port with the same keys.
package sshtest
