// Package sftpserver is the broker's own SFTP server: github.com/pkg/sftp's
// server, plus one extension that replaces a small file atomically in a
// single round trip.
//
// # Overview
//
// Serve speaks SFTP v3 on a reader and a writer (an exec's stdio, in the
// docker backend). Every request but one goes to pkg/sftp's server
// unchanged. The exception is AtomicWrite: a SETSTAT whose attributes are
// only extended pairs, the first named AtomicWrite with the new content as
// its value. The server then does, inside the container, what a client
// otherwise needs three round trips for: it follows a symbolic link at the
// path to its final target, writes the content to a temporary file
// `.<name>.tmp-<random>` beside it, gives it the old file's permission bits
// (and owner, where it may), fsyncs it when the request says so (the
// AtomicWriteSync pair), and renames it over the target. A failure at any
// step removes the temporary file and leaves the target as it was.
//
// # Why SETSTAT
//
// A custom SSH_FXP_EXTENDED request would be the textbook carrier, but
// pkg/sftp's client has no call that sends one; SetExtendedData sends
// SETSTAT with extended attributes, which the SFTP draft reserves for
// vendor extensions and tells servers to ignore when they do not know
// them. Since ignoring it would be a silent no-op, a client must send it
// only to a server that advertises AtomicWrite in its VERSION reply, which
// this server adds to pkg/sftp's list.
//
// # Errors
//
// Errors come back as SFTP status codes of the later drafts (no such file,
// not a directory, file is a directory, no space, link loop, ...), chosen
// from the errno, so a client can tell apart what SFTP v3's few codes
// cannot.
package sftpserver
