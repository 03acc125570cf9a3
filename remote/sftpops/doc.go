// Package sftpops implements the workspace file operations over SFTP, for
// every backend whose files live on another machine or in a container.
//
// # Overview
//
// FS serves Open, Access, WriteFile, Mkdir, Stat, ReadDir, RealPath and
// Glob (opsapi's read, write, ls, find and Resolver abilities) through a
// github.com/pkg/sftp client. The SSH backend gets that client from the
// sftp subsystem of its connection; the docker backend from an SFTP server
// running on the stdio of one long-lived exec. Both the OpenSSH
// sftp-server (internal-sftp) and pkg/sftp's own server are supported.
//
// Paths are POSIX paths on the remote side: absolute, or relative to the
// root given to New. Nothing is confined to the root here; the account or
// the container is the boundary.
//
// # Writes
//
// WriteFile never leaves a torn file. The data goes to a temporary file
// `.<name>.tmp-<random>` in the target's directory, which is synced with
// the fsync@openssh.com extension when the server offers it (unless
// Options.NoSync), given the old
// file's permission bits (and owner, where the account may), and renamed
// over the target with posix-rename@openssh.com (rename(2): atomic, and
// replacing). A server without that extension only has SFTP v3's rename,
// which refuses to replace, so the old file is removed first and a reader
// can then see no file for a moment; this is logged once. A temporary file
// that could not be removed because the channel died is removed on a later
// write.
//
// A server that advertises atomic-write@wsbroker.dev (the broker's own,
// package remote/sftpserver; the names in remote/sftpext)
// gets a file of up to 64 KiB in one request instead: the server does the
// same steps inside the workspace, and the write costs one round trip
// instead of three.
//
// # Errors
//
// Every error is an *opsapi.Error with a kind. SFTP v3 servers report only
// a few status codes (OpenSSH maps ENOTDIR and ELOOP to "no such file" and
// most other errnos to "failure"), so the operations look at the paths
// involved to give the kind the contract promises: a file among the
// parents of Mkdir is ErrNotDir, a directory at WriteFile's path ErrIsDir.
// A lost channel is ErrUnavailable; operations that change nothing are
// retried once on a fresh client when the ClientFunc gives one.
//
// # Cancellation
//
// pkg/sftp's requests take no context, so each operation waits for its
// reply or for ctx, whichever comes first; an abandoned request finishes
// (or fails with the channel) in the background, and a file it opened is
// closed.
package sftpops
