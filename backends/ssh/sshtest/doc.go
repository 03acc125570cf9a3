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
//
// # A VM-like target
//
// StartContainer runs the images/sshd image (Image) as a machine of its
// own, following that image's README: `docker run -d --rm -p 127.0.0.1::22`
// with a generated host key and user key passed in its environment, ready
// once sshd logs that it listens and a login through the port works. The
// published port is read with `docker port` and known_hosts is written for
// [127.0.0.1]:<port>; tests never use the container's bridge address. The
// container is removed when the test ends. Container.KillSessions drops
// every connection (`pkill -KILL -u wsbtest` inside) while sshd keeps
// listening. It needs a docker engine and the image (skips without them,
// fails under CI); the docker CLI does the work, no engine client library.
package sshtest
