// Package sftpext names the broker's SFTP extensions and the conventions
// its server (package sftpserver) and its client side (package sftpops)
// must agree on, so that neither imports the other.
//
// # Extensions
//
// AtomicWrite replaces a small file in one round trip: a SETSTAT whose
// extended pairs are AtomicWrite with the new content (at most
// MaxAtomicWrite bytes) and, optionally, AtomicWriteSync "1" for an fsync
// before the rename. ReadSmall returns a small file's content (at most
// MaxReadSmall bytes) with its attributes: a STAT of ReadSmallPath(p).
// A server that implements one advertises it in its VERSION reply with
// the value "1"; a client sends it to no other. Package sftpserver's
// documentation describes both in full.
//
// # Temporary files
//
// TempName names the temporary file a write goes through before it is
// renamed over the target, the same on both write paths (the server's
// AtomicWrite and sftpops' plain SFTP write), so one pattern finds a
// leftover of either.
package sftpext
