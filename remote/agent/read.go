package agent

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/wsbroker/wsbroker/remote/sftpserver"
)

// serveRead streams the file at path (OpRead): one io.Copy onto the
// stream instead of SFTP's 32 KiB request and answer per packet, which
// is what held large reads through the agent to a fraction of the
// connection's speed. The file is opened as the agent's account, as
// SFTP opens it.
func (s *Server) serveRead(st net.Conn, path string) {
	f, rep := openForRead(path)
	if err := WriteReadReply(st, rep); err != nil || f == nil {
		if f != nil {
			f.Close()
		}
		return
	}
	defer f.Close()
	// A client that leaves before the end (a reader of the first lines)
	// closes its side: stop at once instead of filling the window.
	go func() {
		_, _ = io.Copy(io.Discard, st)
		st.Close()
		f.Close()
	}()
	// Exactly the size announced: a file that grows meanwhile is read as
	// it was; one that shrinks ends the stream short, which the client
	// reports. A pseudo-file (size 0) is read to its end.
	var src io.Reader = f
	if rep.Size > 0 {
		src = io.LimitReader(f, rep.Size)
	}
	_, err := CopyLarge(st, src)
	if err != nil {
		s.log().Debug("read", "path", path, "err", err)
	}
}

// openForRead opens path if it is a regular file, and says why not
// otherwise.
func openForRead(path string) (*os.File, ReadReply) {
	// O_NONBLOCK: opening a fifo would otherwise wait for a writer; a
	// regular file ignores it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, ReadReply{Errno: errnoOf(err)}
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, ReadReply{Errno: errnoOf(err)}
	case fi.IsDir():
		f.Close()
		return nil, ReadReply{Errno: int(syscall.EISDIR)}
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, ReadReply{Invalid: "not a regular file"}
	}
	return f, ReadReply{Size: fi.Size()}
}

// errnoOf is err's errno, or EIO when it carries none.
func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return int(syscall.EIO)
}

// serveWrite replaces the file at req.Path with the stream's chunks
// (OpWrite), atomically, with the same code as SFTP's one-trip
// AtomicWrite, so that a write keeps every rule of the SFTP path in one
// round trip. After a failure the rest of the chunks is read and dropped,
// so the client's writes end and it reads the answer.
func (s *Server) serveWrite(st net.Conn, req Request) {
	cr := NewChunkReader(st)
	err := sftpserver.AtomicWrite(req.Path, cr, req.Sync)
	var rep WriteReply
	if err != nil {
		rep.Errno = errnoOf(err)
		_, _ = io.Copy(io.Discard, cr)
	}
	if err := WriteWriteReply(st, rep); err != nil {
		s.log().Debug("write", "path", req.Path, "err", err)
	}
}

// RawChunk is the buffer of a raw stream's copy. One yamux frame (and
// one hand-off to its send loop) per 32 KiB, io.Copy's size, held a
// stream to about 200 MB/s; 512 KiB frames leave the copy to the
// connection's own speed.
const RawChunk = 512 << 10

// rawBuffers keeps RawChunk buffers between copies: a small file's read
// must not cost a fresh half megabyte.
var rawBuffers = sync.Pool{New: func() any { b := make([]byte, RawChunk); return &b }}

// CopyLarge copies src to dst in RawChunk pieces. Neither side's
// ReaderFrom or WriterTo is used: a file's WriteTo to a stream falls back
// to 32 KiB copies.
func CopyLarge(dst io.Writer, src io.Reader) (int64, error) {
	buf := rawBuffers.Get().(*[]byte)
	defer rawBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
}
