package agent

import (
	"encoding/gob"
	"net"
	"os"
	"path/filepath"

	"github.com/wsbroker/wsbroker/opsapi"
)

// serveReadDir lists path in one answer (OpReadDir). Over SFTP a listing
// of 1,000 entries took about 28 ms in READDIR round trips; here it is
// one trip.
func (s *Server) serveReadDir(st net.Conn, path string) {
	entries, err := os.ReadDir(path)
	if err != nil {
		_ = WriteReadDirReply(st, ReadDirReply{Errno: errnoOf(err)})
		return
	}
	out := make([]DirEntry, 0, len(entries))
	for _, e := range entries {
		if fi, ok := describe(filepath.Join(path, e.Name()), e); ok {
			out = append(out, NewDirEntry(fi))
		}
	}
	if err := WriteReadDirReply(st, ReadDirReply{}); err != nil {
		return
	}
	if err := gob.NewEncoder(st).Encode(out); err != nil {
		s.log().Debug("readdir", "path", path, "err", err)
	}
}

// describe is an entry as a stat describes it: a link by its target where
// that resolves. An entry gone since the listing is left out.
func describe(abs string, e os.DirEntry) (opsapi.FileInfo, bool) {
	lfi, err := e.Info()
	if err != nil {
		return opsapi.FileInfo{}, false
	}
	fi, link := lfi, lfi.Mode()&os.ModeSymlink != 0
	if link {
		if t, err := os.Stat(abs); err == nil {
			fi = t
		}
	}
	// DirEntry keeps whole seconds, as SFTP version 3 does: Stat, still
	// over SFTP, agrees with a listing.
	return opsapi.NewFileInfo(e.Name(), fi, link), true
}
