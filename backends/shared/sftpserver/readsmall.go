package sftpserver

import (
	"encoding/binary"
	"strings"
)

// ReadSmall is the extension that returns a small file's content with its
// attributes, so a read costs one round trip instead of three (stat, open,
// read). A client asks with a STAT whose path is the file's followed by a
// NUL byte and ReadSmall (no real path holds a NUL, so the request cannot
// be mistaken for one); it must send it only to a server that advertises
// ReadSmall in its VERSION reply ("1"). The reply is the ATTRS of the
// file with one extended pair, ReadSmall and the content, when the path
// names a regular file of at most MaxReadSmall bytes that the server can
// read; otherwise it is what a STAT of the path alone answers (the
// attributes, or the error), and the client goes on as without the
// extension.
const ReadSmall = "read-small@wsbroker.dev"

// MaxReadSmall is the largest content a ReadSmall reply carries.
const MaxReadSmall = 64 << 10

// readSmallSuffix ends the path of a ReadSmall request.
const readSmallSuffix = "\x00" + ReadSmall

// SFTP v3 pieces of an ATTRS reply for a regular file.
const (
	fxpStat  = 17
	fxpAttrs = 105

	attrSize        = 0x1
	attrUIDGID      = 0x2
	attrPermissions = 0x4
	attrACModTime   = 0x8
	modeRegular     = 0o100000 // S_IFREG
)

// ReadSmallPath is the path of a ReadSmall request for p.
func ReadSmallPath(p string) string { return p + readSmallSuffix }

// parseReadSmall recognises a ReadSmall request: a STAT whose path ends in
// readSmallSuffix. It returns the request's id and the file's path.
func parseReadSmall(b []byte) (id uint32, p string, ok bool) {
	if len(b) < 5 || b[0] != fxpStat {
		return 0, "", false
	}
	r := reader{b: b[1:]}
	id = r.uint32()
	raw := string(r.bytes())
	if r.err != nil || !strings.HasSuffix(raw, readSmallSuffix) {
		return 0, "", false
	}
	return id, strings.TrimSuffix(raw, readSmallSuffix), true
}

// statPacket is a plain STAT of p, for pkg/sftp's server to answer.
func statPacket(id uint32, p string) []byte {
	b := make([]byte, 4, 4+1+4+4+len(p))
	b = append(b, fxpStat)
	b = binary.BigEndian.AppendUint32(b, id)
	b = appendString(b, p)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}
