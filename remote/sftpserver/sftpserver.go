package sftpserver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sync"
	"syscall"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/remote/sftpext"
)

// PipeSize is what WidenPipes asks for: the kernel's default
// fs.pipe-max-size, the most an unprivileged process may set.
const PipeSize = 1 << 20

// maxPacket bounds an incoming packet, so a broken or hostile peer cannot
// make the server allocate without limit: OpenSSH's bound on a message.
const maxPacket = 256 << 10

// SFTP packet types and attribute flags this package reads or writes.
const (
	fxpVersion     = 2
	fxpSetstat     = 9
	fxpStatus      = 101
	attrExtended   = 0x80000000
	maxSymlinkHops = 40
)

// Status codes (draft-ietf-secsh-filexfer-13; SFTP v3 has only 0 to 8).
const (
	codeOK               = 0
	codeNoSuchFile       = 2
	codePermission       = 3
	codeFailure          = 4
	codeBadMessage       = 5
	codeAlreadyExists    = 11
	codeWriteProtect     = 12
	codeNoSpace          = 14
	codeQuota            = 15
	codeDirNotEmpty      = 18
	codeNotADirectory    = 19
	codeInvalidFilename  = 20
	codeLinkLoop         = 21
	codeInvalidParameter = 23
	codeIsADirectory     = 24
)

// Serve serves SFTP on in and out until in ends, then waits for the
// requests in flight and returns (nil at a clean end of input).
func Serve(in io.Reader, out io.Writer) error {
	w := &packetWriter{out: out}
	toServer := newPacketQueue()
	srv, err := sftp.NewServer(pipeConn{r: toServer, w: w})
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()

	readErr := dispatch(bufio.NewReaderSize(in, 64<<10), toServer, w)
	toServer.closeWithError(readErr)
	err = <-served
	if !errors.Is(readErr, io.EOF) { // dispatch only ends with an error
		return readErr
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// dispatch reads packets from in, answers AtomicWrite and ReadSmall
// requests itself and passes the others to pkg/sftp's server through
// toServer.
func dispatch(in io.Reader, toServer io.Writer, w *packetWriter) error {
	var lenBuf [4]byte
	for {
		if _, err := io.ReadFull(in, lenBuf[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(lenBuf[:])
		if n == 0 || n > maxPacket {
			return fmt.Errorf("sftpserver: packet of %d bytes (limit %d)", n, maxPacket)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(in, body); err != nil {
			return err
		}
		if req, ok := parseAtomicWrite(body); ok {
			code, msg := uint32(codeOK), "OK"
			if req.err != nil {
				code, msg = codeBadMessage, req.err.Error()
			} else if err := AtomicWrite(req.path, bytes.NewReader(req.data), req.sync); err != nil {
				code, msg = statusOf(err), err.Error()
			}
			if err := w.writePacket(statusPacket(req.id, code, msg)); err != nil {
				return err
			}
			continue
		}
		if id, p, ok := parseReadSmall(body); ok {
			if reply, ok := readSmall(id, p); ok {
				if err := w.writePacket(reply); err != nil {
					return err
				}
				continue
			}
			// Not for inlining: pkg/sftp answers it as a plain STAT.
			if _, err := toServer.Write(statPacket(id, p)); err != nil {
				return err
			}
			continue
		}
		if _, err := toServer.Write(lenBuf[:]); err != nil {
			return err
		}
		if _, err := toServer.Write(body); err != nil {
			return err
		}
	}
}

// writeRequest is a parsed AtomicWrite request; err is set when the
// packet names the extension but is malformed.
type writeRequest struct {
	id   uint32
	path string
	data []byte
	sync bool
	err  error
}

// parseAtomicWrite recognises a SETSTAT carrying AtomicWrite. ok is false
// for every other packet, which then goes to pkg/sftp unchanged.
func parseAtomicWrite(b []byte) (req writeRequest, ok bool) {
	if len(b) < 5 || b[0] != fxpSetstat {
		return req, false
	}
	r := reader{b: b[1:]}
	req.id = r.uint32()
	req.path = string(r.bytes())
	flags := r.uint32()
	if r.err != nil || flags != attrExtended {
		return req, false
	}
	count := r.uint32()
	for i := uint32(0); i < count && r.err == nil; i++ {
		name, value := string(r.bytes()), r.bytes()
		switch {
		case i == 0 && name != sftpext.AtomicWrite:
			return req, false
		case name == sftpext.AtomicWrite:
			req.data = value
		case name == sftpext.AtomicWriteSync:
			req.sync = string(value) == "1"
		}
	}
	switch {
	case r.err != nil || count == 0:
		req.err = errors.New("malformed atomic-write request")
	case len(req.data) > sftpext.MaxAtomicWrite:
		req.err = fmt.Errorf("atomic-write content of %d bytes (limit %d)", len(req.data), sftpext.MaxAtomicWrite)
	case !path.IsAbs(req.path):
		req.err = fmt.Errorf("atomic-write path %q is not absolute", req.path)
	}
	return req, true
}

// AtomicWrite replaces p's final target with what r yields, as the
// package documentation describes for the AtomicWrite extension: links
// followed, a temporary file beside the target given the old file's mode
// and owner, synced when asked, put in its place (replace). When r fails, the
// temporary file is removed and p is untouched. The in-box agent's
// streamed write calls it too.
func AtomicWrite(p string, r io.Reader, sync bool) error {
	target, old, err := finalTarget(p)
	if err != nil {
		return err
	}
	if old != nil && old.IsDir() {
		return &os.PathError{Op: "write", Path: p, Err: syscall.EISDIR}
	}
	dir, base := path.Split(target)
	tmp := path.Join(dir, sftpext.TempName(base))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644) // pkg/sftp's mode for a new file
	if err != nil {
		return err
	}
	err = writeTemp(f, r, old, sync)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = replace(tmp, target, old != nil, sync)
	}
	if err != nil {
		_ = os.Remove(tmp) // the error to report is err
		return err
	}
	return nil
}

// writeTemp fills the temporary file and gives it old's mode and owner.
func writeTemp(f *os.File, r io.Reader, old os.FileInfo, sync bool) error {
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if old != nil {
		if err := f.Chmod(old.Mode().Perm()); err != nil {
			return err
		}
		if st, ok := old.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
			// Keep the owner where the account may (root); elsewhere
			// the file becomes the account's, as any rewrite by it
			// would, so a refused Chown is expected.
			_ = f.Chown(int(st.Uid), int(st.Gid))
		}
	}
	if sync {
		return f.Sync()
	}
	return nil
}

// finalTarget follows symbolic links from p to the path the content
// belongs at, and returns what is there now (nil when nothing is).
func finalTarget(p string) (string, os.FileInfo, error) {
	target := p
	for range maxSymlinkHops {
		fi, err := os.Lstat(target)
		if errors.Is(err, os.ErrNotExist) {
			return target, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			return target, fi, nil
		}
		dest, err := os.Readlink(target)
		if err != nil {
			return "", nil, err
		}
		if !path.IsAbs(dest) {
			dest = path.Join(path.Dir(target), dest)
		}
		target = dest
	}
	return "", nil, &os.PathError{Op: "write", Path: p, Err: syscall.ELOOP}
}

// statusOf picks the status code that names err's errno.
func statusOf(err error) uint32 {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return codeFailure
	}
	switch errno {
	case syscall.ENOENT:
		return codeNoSuchFile
	case syscall.EACCES, syscall.EPERM, syscall.EXDEV:
		return codePermission
	case syscall.EROFS:
		return codeWriteProtect
	case syscall.EEXIST:
		return codeAlreadyExists
	case syscall.ENOTEMPTY:
		return codeDirNotEmpty
	case syscall.ENOTDIR:
		return codeNotADirectory
	case syscall.EISDIR:
		return codeIsADirectory
	case syscall.ELOOP:
		return codeLinkLoop
	case syscall.ENAMETOOLONG:
		return codeInvalidFilename
	case syscall.EINVAL:
		return codeInvalidParameter
	case syscall.ENOSPC:
		return codeNoSpace
	case syscall.EDQUOT, syscall.EFBIG:
		return codeQuota
	}
	return codeFailure
}

// statusPacket is an SSH_FXP_STATUS packet, length prefix included.
func statusPacket(id, code uint32, msg string) []byte {
	b := make([]byte, 4, 4+1+4+4+4+len(msg)+4)
	b = append(b, fxpStatus)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, code)
	b = appendString(b, msg)
	b = appendString(b, "") // language tag
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// reader reads SFTP's wire types; the first short read sets err and makes
// every later read return zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uint32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.err = io.ErrUnexpectedEOF
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uint32()
	if r.err != nil || uint32(len(r.b)) < n {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// packetWriter puts whole packets on out, one at a time: pkg/sftp's server
// writes a packet's header and payload separately, and the replies of
// this package's own must not land between them. It also adds this
// package's extensions to the server's VERSION reply. (Gathering replies
// into fewer, larger writes was measured too: no faster over a docker
// exec, so each packet goes out as soon as it is whole.)
type packetWriter struct {
	mu      sync.Mutex
	out     io.Writer
	pending []byte // pkg/sftp's bytes of an unfinished packet
	versed  bool   // the VERSION reply has gone out
}

// Write takes pkg/sftp's output and writes each packet once complete.
func (w *packetWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, p...)
	for len(w.pending) >= 4 {
		n := 4 + int(binary.BigEndian.Uint32(w.pending))
		if len(w.pending) < n {
			break
		}
		pkt := w.pending[:n]
		if !w.versed && n > 4 && pkt[4] == fxpVersion {
			w.versed = true
			pkt = advertise(pkt)
		}
		if _, err := w.out.Write(pkt); err != nil {
			return 0, err
		}
		w.pending = w.pending[n:]
	}
	if len(w.pending) == 0 {
		w.pending = w.pending[:0:0] // do not keep a large payload's buffer
	}
	return len(p), nil
}

// writePacket writes one complete packet of this package's own.
func (w *packetWriter) writePacket(pkt []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.out.Write(pkt)
	return err
}

// advertise returns the VERSION packet pkt with the pairs of this
// package's extensions added.
func advertise(pkt []byte) []byte {
	b := make([]byte, len(pkt), len(pkt)+16+len(sftpext.AtomicWrite)+len(sftpext.ReadSmall)+2)
	copy(b, pkt)
	b = appendString(b, sftpext.AtomicWrite)
	b = appendString(b, "1")
	b = appendString(b, sftpext.ReadSmall)
	b = appendString(b, "1")
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// packetQueue carries the requests the dispatcher passes on to pkg/sftp's
// server. Unlike io.Pipe, a write does not wait for the reader: the
// 64 reads of a large file's chunk are handed over in one go, not
// one goroutine switch each.
type packetQueue struct {
	mu   sync.Mutex
	more *sync.Cond
	buf  []byte
	off  int
	err  error // set once the dispatcher stops; reads drain buf first
}

func newPacketQueue() *packetQueue {
	q := &packetQueue{}
	q.more = sync.NewCond(&q.mu)
	return q
}

func (q *packetQueue) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return 0, io.ErrClosedPipe
	}
	if q.off == len(q.buf) {
		q.buf, q.off = q.buf[:0], 0
	}
	q.buf = append(q.buf, p...)
	q.more.Broadcast()
	return len(p), nil
}

func (q *packetQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.off == len(q.buf) && q.err == nil {
		q.more.Wait()
	}
	if q.off == len(q.buf) {
		return 0, q.err
	}
	n := copy(p, q.buf[q.off:])
	q.off += n
	return n, nil
}

// closeWithError ends the queue: reads return err (io.EOF when nil) once
// what is queued has been read.
func (q *packetQueue) closeWithError(err error) {
	if err == nil {
		err = io.EOF
	}
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.more.Broadcast()
	q.mu.Unlock()
}

// pipeConn is pkg/sftp's side of the server: requests from the
// dispatcher's queue, replies to the packetWriter.
type pipeConn struct {
	r *packetQueue
	w *packetWriter
}

func (c pipeConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c pipeConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c pipeConn) Close() error                { c.r.closeWithError(io.ErrClosedPipe); return nil }
