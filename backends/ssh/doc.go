// Package ssh is the workspace backend for remote machines and VMs
// reached over SSH: a workspace is a directory on a host.
//
// # Overview
//
// New(cfg, logger) reads the known_hosts and key files; Create opens (or
// reuses) one connection per user@host, shared by every workspace there,
// and makes the workspace directory. A workspace is a remote.Workspace
// reached through that connection: file operations go over its SFTP
// channel (package sftpops: atomic writes through posix-rename@openssh.com
// and fsync@openssh.com); commands and searches go through the in-box
// agent the connection starts (package sshexec uploads it by content hash
// and speaks its protocol over a session), else each runs in a session of
// its own (package sshexec) under the process-group wrapper of package
// remoteexec, so a deadline or cancel kills the whole remote tree through
// a second session. This package keeps what is ssh's own: dialing,
// authentication, host keys, the per-host connection and the workspace
// directory.
//
// # Trust
//
// Host keys are always verified against the configured known_hosts files
// (golang.org/x/crypto/ssh/knownhosts), asking the server for a key type
// known_hosts holds; an unknown key or a mismatch is refused with
// ErrPermission and logged. Config.InsecureIgnoreHostKey turns this off
// and is logged loudly at start and at every connection. Only hosts named
// in the configuration can be used unless Config.AllowUnlistedHosts.
// The account on the host is the boundary: paths are not confined to the
// workspace root.
//
// # Connections
//
// Keepalives (keepalive@openssh.com) close a connection that stops
// answering, so calls fail instead of hanging. A lost connection fails the
// calls in flight with ErrUnavailable; the next call reconnects, and calls
// that change nothing retry once on the new connection. Commands lost
// with their connection are killed (by their marker) after the reconnect,
// and temporary files of interrupted writes are removed by the next write.
//
// # Requirements on the host
//
// OpenSSH with the sftp subsystem, a POSIX login shell, bash, setsid,
// GNU grep and /proc (any Linux), and ripgrep for grep.
package ssh
