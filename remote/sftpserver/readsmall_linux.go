//go:build linux

package sftpserver

import (
	"encoding/binary"
	"io"
	"os"
	"syscall"

	"github.com/wsbroker/wsbroker/remote/sftpext"
)

// readSmall returns the ATTRS reply carrying p's content, or false when p
// is not a small regular file this process can read. A FIFO or device is
// never opened: the stat comes first, and the open is non-blocking and
// checked to be the same file.
func readSmall(id uint32, p string) ([]byte, bool) {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > sftpext.MaxReadSmall {
		return nil, false
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !os.SameFile(fi, st) || !st.Mode().IsRegular() || st.Size() > sftpext.MaxReadSmall {
		return nil, false
	}
	// One byte past the size shows a file that grew, and a pseudo-file
	// (size 0, content on read): those are read the usual way.
	buf := make([]byte, st.Size()+1)
	n, err := io.ReadFull(f, buf)
	if n > int(st.Size()) || err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, false
	}
	return attrsPacket(id, sys, buf[:n]), true
}

// attrsPacket is the ATTRS reply for the regular file sys describes, with
// size len(content) (what was read, should it have shrunk since) and
// content as the ReadSmall pair.
func attrsPacket(id uint32, sys *syscall.Stat_t, content []byte) []byte {
	b := make([]byte, 4, 4+1+4+4+8+8+4+8+4+8+len(sftpext.ReadSmall)+4+len(content))
	b = append(b, fxpAttrs)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, attrSize|attrUIDGID|attrPermissions|attrACModTime|attrExtended)
	b = binary.BigEndian.AppendUint64(b, uint64(len(content)))
	b = binary.BigEndian.AppendUint32(b, sys.Uid)
	b = binary.BigEndian.AppendUint32(b, sys.Gid)
	b = binary.BigEndian.AppendUint32(b, modeRegular|sys.Mode&0o7777)
	b = binary.BigEndian.AppendUint32(b, uint32(sys.Atim.Sec))
	b = binary.BigEndian.AppendUint32(b, uint32(sys.Mtim.Sec))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = appendString(b, sftpext.ReadSmall)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	b = append(b, content...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}
