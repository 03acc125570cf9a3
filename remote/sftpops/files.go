package sftpops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/pkg/sftp"

	"github.com/wsbroker/wsbroker/opsapi"
	"github.com/wsbroker/wsbroker/remote/sftpext"
)

// Extensions OpenSSH offers that WriteFile uses.
const (
	extPosixRename = "posix-rename@openssh.com"
	extFsync       = "fsync@openssh.com"
)

// readBufSize is one SFTP read request: pkg/sftp's default packet size.
const readBufSize = 32 << 10

// A large file is read aheadDepth chunks of aheadChunkSize at a time (see
// aheadReader); pkg/sftp sends each chunk as packet-sized requests, so 64
// are in flight throughout. Over a docker exec 8 MiB took ~80 ms with a
// single 2 MiB ReadAt at a time and ~70 ms this way; 256 KiB x 8 and
// 1 MiB x 2 measured the same within the noise.
const (
	aheadChunkSize = 512 << 10
	aheadDepth     = 4
)

// maxLinks bounds the symbolic links WriteFile follows, as the kernel's
// ELOOP does.
const maxLinks = 40

// Open opens a regular file for reading. A missing path is ErrNotExist, a
// directory ErrIsDir, anything else that is not a regular file ErrInvalid:
// opening a fifo would block the SFTP server, and with it every operation
// of the channel. The reader stops with ctx's error once ctx ends (a
// small file read whole by Open has nothing left to wait for).
//
// A small file costs one round trip with the broker's own server, whose
// ReadSmall extension answers the stat with the content; elsewhere (one
// request's worth, as the stat says) three: stat, open and one read of its
// size, with no request spent learning about EOF; Close does not wait for
// the server. A larger file is read ahead in 512 KiB chunks, four in
// flight (see aheadReader): one request at a time, 8 MiB over a docker
// exec's stream took ~146 ms (File.WriteTo's own concurrency measured
// slower still).
func (f *FS) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	op := f.op("Open")
	abs, err := f.Abs("Open", p)
	if err != nil {
		return nil, err
	}
	if f.opt.ReadFile != nil {
		rc, err := f.opt.ReadFile(ctx, abs)
		switch {
		case err == nil:
			return &mappedReader{rc: rc, op: f.op("Read"), path: p}, nil
		case !errors.Is(err, errors.ErrUnsupported):
			return nil, MapErr(op, p, err)
		}
	}
	o, err := withValue(ctx, f, true, func(c *sftp.Client) (opened, error) {
		statPath := abs
		if _, ok := c.HasExtension(sftpext.ReadSmall); ok {
			statPath = sftpext.ReadSmallPath(abs)
		}
		fi, err := c.Stat(statPath)
		if err != nil {
			return opened{}, err
		}
		switch {
		case fi.IsDir():
			return opened{}, opsapi.E(op, p, opsapi.ErrIsDir, nil)
		case !fi.Mode().IsRegular():
			return opened{}, opsapi.E(op, p, opsapi.ErrInvalid, errors.New("not a regular file"))
		}
		if content, ok := inlineContent(fi); ok {
			return opened{content: content, inline: true}, nil
		}
		file, err := c.Open(abs)
		return opened{file: file, size: fi.Size()}, err
	}, func(o opened) {
		if o.file != nil {
			o.file.Close()
		}
	})
	if err != nil {
		return nil, MapErr(op, p, err)
	}
	if o.inline {
		return io.NopCloser(bytes.NewReader(o.content)), nil
	}
	file, size := o.file, o.size
	r := &reader{ctx: ctx, f: file, left: size, op: f.op("Read"), path: p}
	switch {
	case size == 0:
		// A pseudo-file (/proc, cgroupfs) whose size of 0 says nothing:
		// small, whatever it claims; read to EOF.
		r.stream = bufio.NewReaderSize(&fileReader{f: file}, 2*readBufSize)
	case size > readBufSize:
		r.stream = newAheadReader(file, size)
	}
	return r, nil
}

// mappedReader gives a raw stream's read errors the operation's name and
// path and an opsapi kind, as reader does.
type mappedReader struct {
	rc   io.ReadCloser
	op   string
	path string
}

func (r *mappedReader) Read(b []byte) (int, error) {
	n, err := r.rc.Read(b)
	if err != nil && err != io.EOF {
		err = MapErr(r.op, r.path, err)
	}
	return n, err
}

func (r *mappedReader) Close() error { return r.rc.Close() }

// opened is what Open learned in its round trips: the content of a small
// file the server sent with its attributes (ReadSmall), or an open handle
// and the size the stat gave.
type opened struct {
	file    *sftp.File
	size    int64
	content []byte
	inline  bool
}

// inlineContent is the file content a ReadSmall reply carries in fi.
func inlineContent(fi os.FileInfo) ([]byte, bool) {
	st, ok := fi.Sys().(*sftp.FileStat)
	if !ok {
		return nil, false
	}
	for _, e := range st.Extended {
		if e.ExtType == sftpext.ReadSmall {
			return []byte(e.ExtData), true
		}
	}
	return nil, false
}

// aheadChunk is one ReadAt in flight: the bytes at off, len(buf) asked.
type aheadChunk struct {
	off  int64
	buf  []byte
	n    int
	err  error
	done chan struct{}
}

// aheadReader reads a file of known size with several ReadAt calls in
// flight at once, handing their bytes over in order. One ReadAt waits for
// all of its requests, so a single one leaves the stream idle between
// calls; overlapping them keeps requests flowing while the reader's
// caller (an HTTP response) drains the last.
type aheadReader struct {
	f       *sftp.File
	limit   int64 // where the file ends as far as known: the stat's size, or more if it grew
	next    int64 // offset of the next chunk to ask for
	pending []*aheadChunk
	cur     *aheadChunk
	pos     int
	free    [][]byte
	done    bool
}

func newAheadReader(f *sftp.File, size int64) *aheadReader {
	r := &aheadReader{f: f, limit: size}
	r.fill()
	return r
}

// fill keeps aheadDepth chunks in flight, up to the one that shows the end.
func (r *aheadReader) fill() {
	for len(r.pending) < aheadDepth && r.next <= r.limit {
		// The last chunk asks one packet past the size, to learn of the end.
		n := min(int64(aheadChunkSize), r.limit-r.next+readBufSize)
		var buf []byte
		if k := len(r.free); k > 0 && int64(cap(r.free[k-1])) >= n {
			buf, r.free = r.free[k-1][:n], r.free[:k-1]
		} else {
			buf = make([]byte, n, aheadChunkSize)
		}
		c := &aheadChunk{off: r.next, buf: buf, done: make(chan struct{})}
		go func() {
			c.n, c.err = r.f.ReadAt(c.buf, c.off)
			close(c.done)
		}()
		r.pending = append(r.pending, c)
		r.next += n
	}
}

func (r *aheadReader) Read(b []byte) (int, error) {
	rest, err := r.chunk()
	n := copy(b, rest)
	r.pos += n
	if n > 0 {
		return n, nil
	}
	return 0, err
}

// chunk returns the unread bytes of the current chunk, waiting for the
// next when it is used up; with none left, the error that ended the file
// (io.EOF at its end).
func (r *aheadReader) chunk() ([]byte, error) {
	for r.cur == nil || r.pos == r.cur.n {
		if r.cur != nil {
			if r.done {
				return nil, r.cur.err
			}
			r.free = append(r.free, r.cur.buf[:cap(r.cur.buf)])
			r.cur = nil
		}
		if len(r.pending) == 0 {
			return nil, io.EOF
		}
		c := r.pending[0]
		r.pending = r.pending[1:]
		<-c.done
		r.settle(c)
		r.cur, r.pos = c, 0
		r.fill()
	}
	return r.cur.buf[r.pos:r.cur.n], nil
}

// settle decides what a finished chunk means. A reply shorter than asked
// before the known end is not the end (see fileReader): the rest of the
// chunk is asked again, and only an empty reply ends the file there.
func (r *aheadReader) settle(c *aheadChunk) {
	for c.n < len(c.buf) && errors.Is(c.err, io.EOF) && c.off+int64(c.n) < r.limit {
		n, err := r.f.ReadAt(c.buf[c.n:], c.off+int64(c.n))
		c.n += n
		c.err = err
		if n == 0 && errors.Is(err, io.EOF) {
			break // shrank since the stat
		}
	}
	switch {
	case c.err != nil && !errors.Is(c.err, io.EOF):
		r.done = true // the data before the error goes out first
	case c.n < len(c.buf) || errors.Is(c.err, io.EOF):
		r.done, c.err = true, io.EOF
	case c.off+int64(c.n) > r.limit:
		r.limit = c.off + int64(c.n) // grew since the stat: read on
	}
	if r.done {
		r.pending = nil // later chunks are past the end; their calls just finish
	}
}

// fileReader reads a file of unknown size (a pseudo-file) from the start.
// pkg/sftp's ReadAt takes a reply shorter than asked for the file's end,
// but a server may answer short anywhere (a smaller read limit than the
// client's packets, a pseudo-file read a page at a time): only an empty
// reply is the end.
type fileReader struct {
	f   *sftp.File
	off int64
}

func (r *fileReader) Read(b []byte) (int, error) {
	n, err := r.f.ReadAt(b, r.off)
	r.off += int64(n)
	if errors.Is(err, io.EOF) && n > 0 {
		err = nil // ask again from here
	}
	return n, err
}

// reader is an open remote file whose reads fail once ctx ends.
type reader struct {
	ctx context.Context
	f   *sftp.File
	// stream reads a large file (an aheadReader) or a pseudo-file; nil
	// for a small file, read by size.
	stream io.Reader
	off    int64
	left   int64 // of a small file, bytes up to the size the stat gave
	op     string
	path   string
}

func (r *reader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, opsapi.E(r.op, r.path, nil, err)
	}
	if r.stream != nil {
		n, err := r.stream.Read(b)
		if err != nil && err != io.EOF {
			err = MapErr(r.op, r.path, err)
		}
		return n, err
	}
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > r.left {
		b = b[:r.left]
	}
	// ReadAt fills b or fails; a short reply with EOF may still not be
	// the end (see fileReader): the next Read asks again from there.
	n, err := r.f.ReadAt(b, r.off)
	r.off += int64(n)
	r.left -= int64(n)
	switch {
	case err == io.EOF && n == 0:
		r.left = 0 // shrank since the stat
	case err == io.EOF:
		err = nil
		if r.left == 0 {
			err = io.EOF
		}
	case err != nil:
		err = MapErr(r.op, r.path, err)
	case r.left == 0:
		err = io.EOF
	}
	return n, err
}

// WriteTo hands a large file's chunks to w as they arrive, without
// copying them through the caller's buffer: an HTTP response then writes
// 512 KiB at a time.
func (r *reader) WriteTo(w io.Writer) (int64, error) {
	ahead, ok := r.stream.(*aheadReader)
	if !ok {
		return io.Copy(w, struct{ io.Reader }{r})
	}
	var total int64
	for {
		if err := r.ctx.Err(); err != nil {
			return total, opsapi.E(r.op, r.path, nil, err)
		}
		b, err := ahead.chunk()
		if len(b) > 0 {
			n, werr := w.Write(b)
			ahead.pos += n
			total += int64(n)
			if werr != nil {
				return total, werr
			}
		}
		switch {
		case err == io.EOF:
			return total, nil
		case err != nil:
			return total, MapErr(r.op, r.path, err)
		}
	}
}

// Close releases the handle without waiting for the server's answer: the
// file was only read, so there is nothing its close could report.
func (r *reader) Close() error {
	go r.f.Close()
	return nil
}

// Access checks that p exists (following links) and, when the identity is
// known, that its permission bits grant mode to it as access(2) does: uid
// 0 may read and write anything, the owner's bits apply to the owner, the
// group's to a member. ACLs and read-only mounts are not seen.
func (f *FS) Access(ctx context.Context, p string, mode opsapi.AccessMode) error {
	op := f.op("Access")
	abs, err := f.Abs("Access", p)
	if err != nil {
		return err
	}
	var fi os.FileInfo
	err = f.with(ctx, true, func(c *sftp.Client) error {
		var err error
		fi, err = c.Stat(abs)
		return err
	})
	if err != nil {
		return MapErr(op, p, err)
	}
	id := f.opt.Identity
	st, ok := fi.Sys().(*sftp.FileStat)
	if id == nil || !ok || id.UID == 0 {
		return nil
	}
	perm := uint32(fi.Mode().Perm())
	var bits uint32
	switch {
	case int(st.UID) == id.UID:
		bits = perm >> 6
	case slices.Contains(id.GIDs, int(st.GID)):
		bits = perm >> 3
	default:
		bits = perm
	}
	if mode&opsapi.AccessRead != 0 && bits&4 == 0 || mode&opsapi.AccessWrite != 0 && bits&2 == 0 {
		return opsapi.E(op, p, opsapi.ErrPermission, nil)
	}
	return nil
}

// WriteFile replaces p atomically with what r yields (see the package
// documentation). A symbolic link at p is followed, so the link stays and
// its target is replaced. A missing parent is ErrNotExist, a directory at
// p ErrIsDir. When r fails or ctx ends, p is untouched and the temporary
// file removed.
//
// Round trips are what a write costs, so independent requests go out
// together: the lstat of p beside the create of the temporary file next
// to it (p is rarely a link), the close beside the rename. The chmod that
// gives the new file the old one's mode is skipped when new files get
// that mode anyway (learned once per channel).
func (f *FS) WriteFile(ctx context.Context, p string, r io.Reader) error {
	op := f.op("WriteFile")
	abs, err := f.Abs("WriteFile", p)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return MapErr(op, p, err)
	}
	if f.opt.WriteFile != nil {
		err := f.opt.WriteFile(ctx, abs, ctxReader{ctx, r}, !f.opt.NoSync)
		if !errors.Is(err, errors.ErrUnsupported) {
			return MapErr(op, p, err)
		}
	}
	c, err := f.client(ctx, nil)
	if err != nil {
		return MapErr(op, p, err)
	}
	f.removeOrphans(c)
	if _, ok := c.HasExtension(sftpext.AtomicWrite); ok {
		data, whole, err := readUpTo(ctxReader{ctx, r}, sftpext.MaxAtomicWrite)
		if err != nil {
			return MapErr(op, p, err)
		}
		if whole {
			return MapErr(op, p, f.atomicWrite(ctx, c, abs, data))
		}
		r = io.MultiReader(bytes.NewReader(data), r)
	}

	// Every step waits for ctx, except the final rename: once the data
	// is complete, the replace either happens or fails, never half.
	pl, err := f.place(ctx, c, abs)
	if err != nil {
		return MapErr(op, p, err)
	}
	target, old := pl.target, pl.old
	if pl.tempErr != nil {
		err = pl.tempErr
		if ctx.Err() == nil {
			err = f.parentErr(c, target, pl.tempErr)
		}
		if old != nil && old.IsDir() {
			return opsapi.E(op, p, opsapi.ErrIsDir, nil)
		}
		return MapErr(op, p, err)
	}
	file, tmp := pl.temp.file, pl.temp.name
	fail := func(err error) error {
		f.discardWait(c, file, tmp)
		return MapErr(op, p, err)
	}
	if old != nil && old.IsDir() {
		return fail(opsapi.E(op, p, opsapi.ErrIsDir, nil))
	}
	if err := f.fill(ctx, c, file, r, old); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	return MapErr(op, p, f.commit(c, file, tmp, target))
}

// tempFile is a temporary file created beside the file it will replace.
type tempFile struct {
	file *sftp.File
	name string
}

// createTemp creates a temporary file beside target.
func createTemp(c *sftp.Client, target string) (tempFile, error) {
	dir, base := path.Split(target)
	tmp := path.Join(dir, sftpext.TempName(base))
	file, err := c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	return tempFile{file, tmp}, err
}

// placement is where a write lands: the final target (p, or where its
// links lead), the file there now (nil when none), and the temporary file
// beside the target or the error creating it.
type placement struct {
	target  string
	old     os.FileInfo
	temp    tempFile
	tempErr error
}

// place finds abs's final target while the temporary file is created
// beside abs, in the same round trip; when abs is a link, the temporary
// file is made again beside the link's target.
func (f *FS) place(ctx context.Context, c *sftp.Client, abs string) (placement, error) {
	return waitValue(ctx, func() (placement, error) {
		var v placement
		done := make(chan struct{})
		go func() {
			defer close(done)
			v.temp, v.tempErr = createTemp(c, abs)
		}()
		target, old, err := f.finalTarget(c, abs)
		<-done
		v.target, v.old = target, old
		if err == nil && target == abs {
			return v, nil
		}
		// abs is a link (or failed to resolve): the temporary file
		// belongs beside the final target instead.
		if v.tempErr == nil {
			f.discard(c, v.temp.file, v.temp.name)
		}
		if err != nil {
			return v, err
		}
		v.temp, v.tempErr = createTemp(c, target)
		return v, nil
	}, func(v placement) {
		if v.tempErr == nil {
			f.discard(c, v.temp.file, v.temp.name)
		}
	})
}

// fill writes r into the temporary file, gives it the old file's mode
// and owner, and syncs it when the server offers that and it is wanted.
func (f *FS) fill(ctx context.Context, c *sftp.Client, file *sftp.File, r io.Reader, old os.FileInfo) error {
	return wait(ctx, func() error {
		_, err := file.ReadFromWithConcurrency(ctxReader{ctx, r}, 0)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if old != nil {
			if err := f.keepMode(c, file, old.Mode().Perm()); err != nil {
				return err
			}
			if st, ok := old.Sys().(*sftp.FileStat); ok && f.opt.Identity != nil &&
				(int(st.UID) != f.opt.Identity.UID || !slices.Contains(f.opt.Identity.GIDs, int(st.GID))) {
				// Keep the owner where the account may (root);
				// elsewhere the file becomes the account's, as any
				// rewrite by it would, so a refused Chown is expected.
				_ = file.Chown(int(st.UID), int(st.GID))
			}
		}
		if v, ok := c.HasExtension(extFsync); ok && v == "1" && !f.opt.NoSync {
			if err := file.Sync(); err != nil {
				return err
			}
		}
		return nil
	})
}

// commit replaces target with the filled temporary file. The data is
// synced: close and rename go out together (renaming an open file is
// fine). A failed close of a synced file loses nothing, so only the
// rename decides.
func (f *FS) commit(c *sftp.Client, file *sftp.File, tmp, target string) error {
	closed := make(chan error, 1)
	go func() { closed <- file.Close() }()
	if err := f.rename(c, tmp, target); err != nil {
		if cerr := <-closed; cerr != nil {
			// The rename's error is the one to report.
			f.log.Debug("closing a temporary file failed after its rename failed", "path", tmp, "err", cerr)
		}
		f.discardWait(c, nil, tmp)
		return err
	}
	if err := <-closed; err != nil {
		f.log.Warn("closing a written file failed after its rename", "path", target, "err", err)
	}
	return nil
}

// readUpTo reads r to its end if that comes within limit bytes (whole),
// else returns the limit+1 bytes read so far.
func readUpTo(r io.Reader, limit int) (data []byte, whole bool, err error) {
	buf := make([]byte, limit+1)
	n, err := io.ReadFull(r, buf)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return buf[:n], true, nil
	case err != nil:
		return nil, false, err
	}
	return buf, false, nil
}

// atomicWrite replaces abs with data in one request to a server with the
// atomic-write@wsbroker.dev extension (package remote/sftpserver), which
// does inside the workspace what WriteFile's other path does in three
// round trips: link followed, temporary file, old mode and owner, fsync
// unless NoSync, rename. Like that path's rename, the request, once sent,
// is waited for whatever ctx does: the replace happens whole or not at all.
func (f *FS) atomicWrite(ctx context.Context, c *sftp.Client, abs string, data []byte) error {
	ext := []sftp.StatExtended{{ExtType: sftpext.AtomicWrite, ExtData: string(data)}}
	if !f.opt.NoSync {
		ext = append(ext, sftp.StatExtended{ExtType: sftpext.AtomicWriteSync, ExtData: "1"})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.SetExtendedData(abs, ext)
}

// keepMode gives the temporary file mode unless the server creates files
// with it anyway. The mode a new file gets (0666 less the server's umask,
// or a directory's default ACL) is learned by one fstat per directory
// and channel.
func (f *FS) keepMode(c *sftp.Client, file *sftp.File, mode os.FileMode) error {
	dir := path.Dir(file.Name())
	f.mu.Lock()
	if f.modeOf != c {
		f.modeOf, f.createModes = c, map[string]os.FileMode{}
	}
	created, known := f.createModes[dir]
	f.mu.Unlock()
	if !known {
		fi, err := file.Stat()
		if err != nil {
			return err
		}
		created = fi.Mode().Perm()
		f.mu.Lock()
		if f.modeOf == c {
			if len(f.createModes) >= maxModeDirs {
				clear(f.createModes)
			}
			f.createModes[dir] = created
		}
		f.mu.Unlock()
	}
	if created == mode {
		return nil
	}
	return file.Chmod(mode)
}

// maxModeDirs bounds keepMode's memory of directories.
const maxModeDirs = 1024

// finalTarget follows symbolic links at abs to the path a write must
// replace, and describes it (nil when it does not exist yet).
func (f *FS) finalTarget(c *sftp.Client, abs string) (string, os.FileInfo, error) {
	target := abs
	for range maxLinks {
		fi, err := c.Lstat(target)
		if notExist(err) {
			return target, nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		if !isLink(fi) {
			return target, fi, nil
		}
		dest, err := c.ReadLink(target)
		if err != nil {
			return "", nil, err
		}
		target = opsapi.Resolve(path.Dir(target), dest)
	}
	return "", nil, opsapi.E("readlink", abs, opsapi.ErrPermission, errors.New("too many levels of symbolic links"))
}

// parentErr refines a failed create: a file among the parents is
// ErrNotDir (OpenSSH says "no such file").
func (f *FS) parentErr(c *sftp.Client, target string, err error) error {
	if !notExist(err) {
		return err
	}
	for dir := path.Dir(target); dir != "/" && dir != "."; dir = path.Dir(dir) {
		fi, serr := c.Stat(dir)
		if serr == nil {
			if !fi.IsDir() {
				return opsapi.E("create", target, opsapi.ErrNotDir, err)
			}
			return err
		}
	}
	return err
}

// rename moves tmp over target: posix-rename when offered, else remove
// and rename (not atomic).
func (f *FS) rename(c *sftp.Client, tmp, target string) error {
	if _, ok := c.HasExtension(extPosixRename); ok {
		return c.PosixRename(tmp, target)
	}
	if !f.warnedRename.Swap(true) {
		f.log.Warn("SFTP server lacks posix-rename@openssh.com; writes replace files non-atomically")
	}
	if err := c.Remove(target); err != nil && !notExist(err) {
		return err
	}
	return c.Rename(tmp, target)
}

// discardWait is discard, waited for up to discardTimeout: a failed write
// returns with its temporary file gone while the channel lives, and
// without hanging on a channel that does not answer.
func (f *FS) discardWait(c *sftp.Client, file *sftp.File, tmp string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.discard(c, file, tmp)
	}()
	t := time.NewTimer(discardTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// discardTimeout bounds discardWait.
const discardTimeout = 5 * time.Second

// discard closes file (if any) and removes tmp; when the channel is gone
// tmp is remembered and removed by a later write.
func (f *FS) discard(c *sftp.Client, file *sftp.File, tmp string) {
	if file != nil {
		file.Close()
	}
	if err := c.Remove(tmp); err != nil && !notExist(err) {
		f.mu.Lock()
		f.orphans[tmp] = struct{}{}
		f.mu.Unlock()
		f.log.Warn("temporary file left behind", "path", tmp, "err", err)
	}
}

// removeOrphans removes the temporary files earlier writes could not.
func (f *FS) removeOrphans(c *sftp.Client) {
	f.mu.Lock()
	if len(f.orphans) == 0 {
		f.mu.Unlock()
		return
	}
	list := make([]string, 0, len(f.orphans))
	for p := range f.orphans {
		list = append(list, p)
	}
	f.mu.Unlock()
	for _, p := range list {
		if err := c.Remove(p); err == nil || notExist(err) {
			f.mu.Lock()
			delete(f.orphans, p)
			f.mu.Unlock()
		}
	}
}

// Orphans lists the temporary files that are still waiting for removal.
func (f *FS) Orphans() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.orphans))
	for p := range f.orphans {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ctxReader reads from r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// Mkdir creates p and its missing parents. An existing directory is fine,
// an existing non-directory ErrExist, a file among the parents ErrNotDir.
func (f *FS) Mkdir(ctx context.Context, p string) error {
	op := f.op("Mkdir")
	abs, err := f.Abs("Mkdir", p)
	if err != nil {
		return err
	}
	err = f.with(ctx, true, func(c *sftp.Client) error {
		var missing []string
		for dir := abs; ; dir = path.Dir(dir) {
			fi, err := c.Stat(dir)
			if err == nil {
				switch {
				case fi.IsDir():
				case dir == abs:
					return opsapi.E(op, p, opsapi.ErrExist, errors.New("exists and is not a directory"))
				default:
					return opsapi.E(op, p, opsapi.ErrNotDir, errors.New(dir+" is not a directory"))
				}
				break
			}
			if !notExist(err) || dir == "/" {
				return err
			}
			missing = append(missing, dir)
		}
		for i := len(missing) - 1; i >= 0; i-- {
			if err := c.Mkdir(missing[i]); err != nil {
				// Created meanwhile by someone else is fine.
				if fi, serr := c.Stat(missing[i]); serr != nil || !fi.IsDir() {
					return err
				}
			}
		}
		return nil
	})
	return MapErr(op, p, err)
}

// Stat describes p, following a symbolic link; a link that cannot be
// followed (dangling, looping) is described as itself with Type
// TypeSymlink.
func (f *FS) Stat(ctx context.Context, p string) (opsapi.FileInfo, error) {
	op := f.op("Stat")
	abs, err := f.Abs("Stat", p)
	if err != nil {
		return opsapi.FileInfo{}, err
	}
	var out opsapi.FileInfo
	err = f.with(ctx, true, func(c *sftp.Client) error {
		fi, err := c.Lstat(abs)
		if err != nil {
			return err
		}
		out = describe(c, abs, path.Base(abs), fi)
		return nil
	})
	if err != nil {
		return opsapi.FileInfo{}, MapErr(op, p, err)
	}
	return out, nil
}

// describe turns the lstat result lfi of abs into a FileInfo, following
// it when it is a link.
func describe(c *sftp.Client, abs, name string, lfi os.FileInfo) opsapi.FileInfo {
	if !isLink(lfi) {
		return opsapi.NewFileInfo(name, lfi, false)
	}
	if fi, err := c.Stat(abs); err == nil {
		return opsapi.NewFileInfo(name, fi, true)
	}
	return opsapi.NewFileInfo(name, lfi, true)
}

// ReadDir lists p, sorted by name, each entry described as Stat would. A
// missing p is ErrNotExist, a file ErrNotDir.
func (f *FS) ReadDir(ctx context.Context, p string) ([]opsapi.FileInfo, error) {
	op := f.op("ReadDir")
	abs, err := f.Abs("ReadDir", p)
	if err != nil {
		return nil, err
	}
	if f.opt.ReadDir != nil {
		out, err := f.opt.ReadDir(ctx, abs)
		if !errors.Is(err, errors.ErrUnsupported) {
			return out, MapErr(op, p, err)
		}
	}
	var out []opsapi.FileInfo
	err = f.with(ctx, true, func(c *sftp.Client) error {
		entries, err := c.ReadDirContext(ctx, abs)
		if err != nil {
			// OpenSSH reports opendir's ENOTDIR as "no such file".
			if fi, serr := c.Stat(abs); serr == nil && !fi.IsDir() {
				return opsapi.E(op, p, opsapi.ErrNotDir, nil)
			}
			return err
		}
		out = make([]opsapi.FileInfo, 0, len(entries))
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			out = append(out, describe(c, path.Join(abs, e.Name()), e.Name(), e))
		}
		return nil
	})
	if err != nil {
		return nil, MapErr(op, p, err)
	}
	slices.SortFunc(out, func(a, b opsapi.FileInfo) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// RealPath returns p's canonical absolute path, every link resolved. A
// missing path (or a dangling link) is ErrNotExist. OpenSSH's realpath
// resolves links itself; with a server that only cleans the path
// (pkg/sftp's), the links are followed here, one lstat per component.
func (f *FS) RealPath(ctx context.Context, p string) (string, error) {
	op := f.op("RealPath")
	abs, err := f.Abs("RealPath", p)
	if err != nil {
		return "", err
	}
	out, err := withValue(ctx, f, true, func(c *sftp.Client) (string, error) {
		if !serverResolvesLinks(c) {
			return resolveLinks(c, abs)
		}
		out, err := c.RealPath(abs)
		if err != nil {
			return "", err
		}
		// A server may canonicalize a missing last component.
		_, err = c.Lstat(out)
		return out, err
	}, nil)
	if err != nil {
		return "", MapErr(op, p, err)
	}
	return out, nil
}

// serverResolvesLinks tells OpenSSH's sftp-server (whose realpath
// resolves links, and which has offered fsync@openssh.com since 6.5) from
// servers whose realpath only cleans the path.
func serverResolvesLinks(c *sftp.Client) bool {
	_, ok := c.HasExtension(extFsync)
	return ok
}

// resolveLinks is realpath(3) done over lstat and readlink.
func resolveLinks(c *sftp.Client, abs string) (string, error) {
	parts := strings.Split(strings.Trim(abs, "/"), "/")
	resolved := "/"
	links := 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, name)
		fi, err := c.Lstat(next)
		if err != nil {
			return "", err
		}
		if isLink(fi) {
			if links++; links > maxLinks {
				return "", opsapi.E("realpath", abs, opsapi.ErrPermission, errors.New("too many levels of symbolic links"))
			}
			dest, err := c.ReadLink(next)
			if err != nil {
				return "", err
			}
			if strings.HasPrefix(dest, "/") {
				resolved = "/"
			}
			parts = append(strings.Split(dest, "/"), parts...)
			continue
		}
		if len(parts) > 0 && !fi.IsDir() {
			return "", opsapi.E("realpath", abs, opsapi.ErrNotDir, nil)
		}
		resolved = next
	}
	return resolved, nil
}

// CheckCwd resolves the links of cwd (absolute) on the server and refuses
// a directory that lands under /proc, or one with an ancestor that does:
// fdlink/7 with fdlink -> /proc/self/fd names fd 7 of whichever process
// resolves it (the file server's here, the command's later), so it is
// refused whatever it resolves to now. Each ancestor costs one round
// trip; a cwd without a slash has none. A missing directory is
// ErrNotExist; one that is not a directory is left for the command's
// wrapper to report.
func (f *FS) CheckCwd(ctx context.Context, op, given, cwd string) error {
	refuse := func(real string) error {
		return opsapi.E(op, given, opsapi.ErrPermission, fmt.Errorf("working directory resolves to %s, under /proc: refused", real))
	}
	real, err := f.RealPath(ctx, cwd)
	switch {
	case err == nil && underProc(real):
		return refuse(real)
	case err == nil, errors.Is(err, opsapi.ErrNotDir), errors.Is(err, opsapi.ErrPermission), errors.Is(err, opsapi.ErrNotExist):
	default:
		return err
	}
	for dir := path.Dir(cwd); dir != "/" && dir != "."; dir = path.Dir(dir) {
		if parent, perr := f.RealPath(ctx, dir); perr == nil && underProc(parent) {
			return refuse(parent + "/" + strings.TrimPrefix(cwd, dir+"/"))
		}
	}
	if errors.Is(err, opsapi.ErrNotExist) {
		return err
	}
	return nil // the wrapper reports what it finds
}

// underProc reports whether the absolute path p is /proc or below it.
func underProc(p string) bool { return opsapi.Within("/proc", path.Clean(p)) }
