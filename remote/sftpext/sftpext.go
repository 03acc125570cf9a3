package sftpext

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// The AtomicWrite extension's names. AtomicWrite's value in the VERSION
// reply is its version, "1"; in a SETSTAT it is the file's new content.
// AtomicWriteSync ("1") asks for an fsync before the rename.
const (
	AtomicWrite     = "atomic-write@wsbroker.dev"
	AtomicWriteSync = "atomic-write-sync@wsbroker.dev"
)

// MaxAtomicWrite is the largest content one AtomicWrite request may carry;
// larger files go through the usual open, write, close and rename.
const MaxAtomicWrite = 64 << 10

// ReadSmall is the extension that returns a small file's content with its
// attributes, so a read costs one round trip instead of three (stat, open,
// read). A client asks with a STAT of ReadSmallPath(p): the file's path
// followed by a NUL byte and ReadSmall (no real path holds a NUL, so the
// request cannot be mistaken for one). The reply is the ATTRS of the file
// with one extended pair, ReadSmall and the content, when the path names a
// regular file of at most MaxReadSmall bytes that the server can read;
// otherwise it is what a STAT of the path alone answers (the attributes,
// or the error), and the client goes on as without the extension.
const ReadSmall = "read-small@wsbroker.dev"

// MaxReadSmall is the largest content a ReadSmall reply carries.
const MaxReadSmall = 64 << 10

// readSmallSuffix ends the path of a ReadSmall request.
const readSmallSuffix = "\x00" + ReadSmall

// ReadSmallPath is the path of a ReadSmall request for p.
func ReadSmallPath(p string) string { return p + readSmallSuffix }

// CutReadSmallPath is the inverse of ReadSmallPath: the file's path, and
// whether raw was a ReadSmall request's path at all.
func CutReadSmallPath(raw string) (p string, ok bool) {
	return strings.CutSuffix(raw, readSmallSuffix)
}

// TempSuffix comes between the target's name and the random part of a
// TempName.
const TempSuffix = ".tmp-"

// TempName is the name of a temporary file that will replace base:
// hidden, marked, random, and short enough for NAME_MAX.
func TempName(base string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	if len(base) > 200 {
		base = base[:200]
	}
	return "." + base + TempSuffix + hex.EncodeToString(b)
}
