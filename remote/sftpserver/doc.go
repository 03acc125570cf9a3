// Package sftpserver is the broker's own SFTP server: github.com/pkg/sftp's
// server, plus two extensions that each save round trips: one replaces a
// small file atomically in a single round trip, the other returns a small
// file's content with its stat. Their names, limits and the temporary
// file's name are in package sftpext, which the client side (package
// sftpops) imports instead of this one.
//
// # Overview
//
// Serve speaks SFTP v3 on a reader and a writer (an exec's stdio, in the
// docker backend). Every request but two kinds goes to pkg/sftp's server
// unchanged. The first exception is AtomicWrite: a SETSTAT whose attributes are
// only extended pairs, the first named AtomicWrite with the new content as
// its value. The server then does, inside the container, what a client
// otherwise needs three round trips for: it follows a symbolic link at the
// path to its final target, writes the content to a temporary file
// `.<name>.tmp-<random>` beside it, gives it the old file's permission bits
// (and owner, where it may), fsyncs it when the request says so (the
// AtomicWriteSync pair), and puts it in the target's place: renamed over
// it, or, for an unsynced write over a file on Linux, swapped with it and
// the old one unlinked (ext4 starts writeback before a rename over a file,
// which was most of a small write's time). A failure at any
// step removes the temporary file and leaves the target as it was.
//
// The second is ReadSmall: a STAT of a path followed by a NUL byte and
// ReadSmall. When the path names a regular file of at most
// sftpext.MaxReadSmall bytes that the server may read, the reply is its attributes with the
// content as an extended pair; otherwise the request goes to pkg/sftp as
// the plain STAT of the path. A small read then costs one round trip
// instead of stat, open and read.
//
// WidenPipes grows the server's stdio pipes, so it can write ahead of a
// slow reader (see its documentation for the figures).
//
// # Why SETSTAT, and a NUL in a path
//
// A custom SSH_FXP_EXTENDED request would be the textbook carrier, but
// pkg/sftp's client has no call that sends one; SetExtendedData sends
// SETSTAT with extended attributes, which the SFTP draft reserves for
// vendor extensions and tells servers to ignore when they do not know
// them. Since ignoring it would be a silent no-op, a client must send it
// only to a server that advertises AtomicWrite in its VERSION reply, which
// this server adds to pkg/sftp's list. ReadSmall needs a reply with data,
// which of pkg/sftp's client calls only a stat (extended attributes) gets;
// the NUL-separated suffix marks the request, and no file's path can hold
// a NUL, so no plain STAT is ever taken for one. It too is sent only to a
// server that advertises it.
//
// # Errors
//
// Errors come back as SFTP status codes of the later drafts (no such file,
// not a directory, file is a directory, no space, link loop, ...), chosen
// from the errno, so a client can tell apart what SFTP v3's few codes
// cannot.
package sftpserver
