package sftpserver

import (
	"encoding/binary"

	"github.com/wsbroker/wsbroker/remote/sftpext"
)

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

// parseReadSmall recognises a ReadSmall request (sftpext.ReadSmall): a
// STAT of sftpext.ReadSmallPath(p). It returns the request's id and p.
func parseReadSmall(b []byte) (id uint32, p string, ok bool) {
	if len(b) < 5 || b[0] != fxpStat {
		return 0, "", false
	}
	r := reader{b: b[1:]}
	id = r.uint32()
	raw := string(r.bytes())
	if r.err != nil {
		return 0, "", false
	}
	p, ok = sftpext.CutReadSmallPath(raw)
	if !ok {
		return 0, "", false
	}
	return id, p, true
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
